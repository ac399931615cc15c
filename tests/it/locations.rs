//! Locations end to end: required fields, every field with its bounds,
//! the system-generated keys (and that they are sealed at rest), default
//! product transactions, expands, the tree (moves and scope), delete
//! rules; location infos and product transactions.

use crate::engine_tests;
use crate::support::db::{db, wait_for_lock_wait, Db};
use crate::support::{str_of, Engine, Resp, Tenant, TestApp};
use serde_json::{json, Value};
use std::collections::BTreeSet;

engine_tests!(
    location_required_fields,
    location_fields_round_trip,
    location_flags_are_booleans_from_the_start,
    location_field_bounds,
    location_keys_are_generated_and_sealed,
    the_bank_account_number_is_sealed_and_masked,
    location_default_product_transactions,
    location_expands,
    location_tree_moves,
    location_moves_refused,
    a_location_created_under_a_moving_parent_follows_it,
    crossing_moves_make_no_cycle,
    a_move_follows_its_ancestor_s_move,
    location_delete_refused_while_holding_records,
    location_delete_names_tags_postbacks_and_terminals,
    location_api_id_is_unique_within_its_tenant,
    migration_38_settles_earlier_duplicates,
    location_delete_empty_and_own,
    location_list_is_scoped,
    locationinfo_shape,
    location_terminals_and_tags_come_from_the_data,
    locationinfo_relationship_and_active,
    product_transactions_read,
    product_transactions_current_batch,
);

const BOOLEAN_FLAGS: [&str; 3] = [
    "contact_email_trx_receipt_default",
    "show_contact_notes",
    "show_contact_files",
];

/// The flags the spec types boolean answer false until set, never null:
/// on new locations, the bootstrap's, one sent null, and (migration 32)
/// on locations stored before.
fn location_flags_are_booleans_from_the_start(app: &TestApp) {
    let t = app.bootstrap();
    let own = t.location_id();
    let child = t.location(&own, "Flags");
    for id in [&own, &child] {
        let l = t.get(&format!("/v2/locations/{id}")).expect(200).body["location"].clone();
        for flag in BOOLEAN_FLAGS {
            assert_eq!(l[flag], false, "{id}: {flag} in {l}");
        }
    }
    let info = t.get("/v2/locationinfos").expect(200).body["locationinfos"][0].clone();
    for flag in BOOLEAN_FLAGS {
        assert_eq!(info[flag], false, "locationinfo {flag}");
    }
    let r = t
        .put(
            &format!("/v2/locations/{child}"),
            json!({ "location": { "show_contact_notes": 1, "show_contact_files": null } }),
        )
        .expect(200);
    assert_eq!(r.body["location"]["show_contact_notes"], true);
    assert_eq!(r.body["location"]["show_contact_files"], false, "null is off");

    // Locations stored before (null) take false when migration 32 runs;
    // a value set stays.
    let mut db = db(app);
    for id in [&own, &child] {
        db.exec(
            "UPDATE locations SET contact_email_trx_receipt_default = NULL, show_contact_files = NULL WHERE id = ?",
            &[id.as_str()],
        );
    }
    db.exec("DELETE FROM schema_migrations WHERE version = 32", &[]);
    let out = app.cli(&["migrate"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for id in [&own, &child] {
        let l = t.get(&format!("/v2/locations/{id}")).expect(200).body["location"].clone();
        assert_eq!(l["contact_email_trx_receipt_default"], false, "{l}");
        assert_eq!(l["show_contact_files"], false, "{l}");
        assert_eq!(l["show_contact_notes"], json!(id == &child), "{l}");
    }
}

/// Inserts a product transaction straight into the database (the API has
/// no way to create one); returns its id.
pub fn insert_product_transaction(app: &TestApp, location_id: &str, method: &str) -> String {
    let id = uuid::Uuid::now_v7().simple().to_string();
    db(app).exec(
        "INSERT INTO product_transactions (id, location_id, payment_method, processor, title, active, settings, created_ts, modified_ts) \
         VALUES (?, ?, ?, 'sandbox', 'Extra account', 1, '{}', 1700000000, 1700000000)",
        &[&id, location_id, method],
    );
    id
}

// ---------------------------------------------------------------------
// Small helpers.

fn text(len: usize, c: char) -> String {
    std::iter::repeat_n(c, len).collect()
}

/// The field names of a validation error body.
fn error_fields(r: &Resp) -> Vec<String> {
    r.body["errors"]
        .as_object()
        .unwrap_or_else(|| panic!("no errors object: {}", r.text))
        .keys()
        .cloned()
        .collect()
}

/// The ids of a list answer under `key`.
fn ids(r: &Resp, key: &str) -> BTreeSet<String> {
    r.body[key]
        .as_array()
        .unwrap_or_else(|| panic!("no {key} list: {}", r.text))
        .iter()
        .map(|x| str_of(&x["id"]))
        .collect()
}

fn location_body(t: &Tenant, extra: Value) -> Value {
    let mut b =
        json!({ "parent_id": t.location_id(), "name": "Branch", "branding_domain_url": "pay.example.com" });
    for (k, v) in extra.as_object().unwrap() {
        b[k.as_str()] = v.clone();
    }
    b
}

fn get_location(t: &Tenant, id: &str) -> Value {
    t.get(&format!("/v2/locations/{id}")).expect(200).body["location"].clone()
}

fn user_at(t: &Tenant, location: &str, role: &str) -> Tenant {
    let (id, key) = t.user(location, Some(role));
    t.as_user(&id, &key)
}

// ---------------------------------------------------------------------

fn location_required_fields(app: &TestApp) {
    let t = app.bootstrap();
    let other = app.bootstrap();
    let own = t.location_id();
    let r = t.post("/v2/locations", json!({ "location": {} })).expect(422);
    for f in ["parent_id", "name", "branding_domain_url"] {
        assert!(!r.errors(f).is_empty(), "{f} is named: {}", r.text);
    }
    for f in ["parent_id", "name", "branding_domain_url"] {
        let mut b = location_body(&t, json!({}));
        b.as_object_mut().unwrap().remove(f);
        let r = t.post("/v2/locations", json!({ "location": b })).expect(422);
        assert_eq!(error_fields(&r), vec![f.to_string()], "{}", r.text);
        let mut b = location_body(&t, json!({}));
        b[f] = json!("");
        let r = t.post("/v2/locations", json!({ "location": b })).expect(422);
        assert_eq!(error_fields(&r), vec![f.to_string()], "empty {f}: {}", r.text);
    }
    for bad in [
        "nope".to_string(),
        uuid::Uuid::new_v4().simple().to_string(),
        other.location_id(),
    ] {
        let r = t
            .post(
                "/v2/locations",
                json!({ "location": location_body(&t, json!({ "parent_id": bad })) }),
            )
            .expect(422);
        assert!(!r.errors("parent_id").is_empty(), "{}", r.text);
    }
    assert_eq!(
        t.get("/v2/locations").expect(200).body["meta"]["pagination"]["totalCount"],
        1,
        "nothing was created"
    );

    // PUT: parent_id and name may be left out of an update (partial PUT)
    // but not blanked.
    let child = t.location(&own, "Branch");
    let path = format!("/v2/locations/{child}");
    let r = t.put(&path, json!({ "location": { "name": "" } })).expect(422);
    assert_eq!(error_fields(&r), vec!["name".to_string()], "{}", r.text);
    let r = t
        .put(&path, json!({ "location": { "parent_id": null } }))
        .expect(422);
    assert_eq!(error_fields(&r), vec!["parent_id".to_string()], "{}", r.text);
    let r = t
        .put(&path, json!({ "location": { "parent_id": own, "name": "" } }))
        .expect(422);
    assert!(!r.errors("name").is_empty(), "{}", r.text);
    let r = t
        .put(&path, json!({ "location": { "parent_id": "", "name": "X" } }))
        .expect(422);
    assert!(!r.errors("parent_id").is_empty(), "{}", r.text);
    assert_eq!(
        get_location(&t, &child)["name"],
        "Branch",
        "refused updates change nothing"
    );
    let r = t
        .put(
            &path,
            json!({ "location": { "parent_id": own, "name": "Renamed" } }),
        )
        .expect(200);
    assert_eq!(r.body["location"]["name"], "Renamed");
    assert_eq!(r.body["location"]["branding_domain_url"], "pay.example.com");
}

fn location_fields_round_trip(app: &TestApp) {
    let t = app.bootstrap();
    let own = t.location_id();
    let input = json!({
        "parent_id": own,
        "name": "Zweigstelle Süd ☃",
        "branding_domain_url": "https://pay.example.com",
        "branding_domain_id": "0123456789abcdef01234567",
        "account_number": "ACCT-0042",
        "address1": "1 Main St",
        "address2": "Suite 200",
        "city": "Austin",
        "state": "Texas",
        "zip_code": "78701-1234",
        "office_phone": "5125550100",
        "office_ext_phone": "123",
        "fax": "5125550199",
        "aba": "072000326",
        "dda": "000123456789",
        "tz": "America/Chicago",
        "receipt_logo": "https://cdn.example.com/logo.png",
        "email_reply_to": "billing@example.com",
        "location_api_id": "LOC-API-0001-abcdefghijkl",
        "location_c1": "one",
        "location_c2": "two",
        "location_c3": "three ✓",
        "developer_company_id": "abcdefabcdefabcdefabcdef01",
        "contact_email_trx_receipt_default": 1,
        "recurring_notification_days_default": 7,
        "show_contact_notes": true,
        "show_contact_files": "0",
    });
    let created = t.post("/v2/locations", json!({ "location": input })).expect(201);
    let c = created.body["location"].clone();
    let id = str_of(&c["id"]);
    assert!((24..=36).contains(&id.len()), "id length");
    for (k, v) in input.as_object().unwrap() {
        if v.is_string() && !k.starts_with("show_") && k != "dda" {
            assert_eq!(c[k.as_str()], *v, "{k} round-trips");
        }
    }
    assert_eq!(c["dda"], "XXXXXXXX6789", "the bank account number, masked");
    assert_eq!(c["contact_email_trx_receipt_default"], true);
    assert_eq!(c["recurring_notification_days_default"], 7);
    assert_eq!(c["show_contact_notes"], true);
    assert_eq!(c["show_contact_files"], false);
    assert_eq!(c["default_cc"], Value::Null);
    assert_eq!(c["default_ach"], Value::Null);
    for ts in ["created_ts", "modified_ts"] {
        assert_eq!(c[ts].as_i64().unwrap().to_string().len(), 10, "{ts}");
    }
    assert_eq!(
        c["_links"]["self"]["href"],
        format!("{}/v2/locations/{id}", app.base)
    );
    assert_eq!(get_location(&t, &id), c, "GET answers what POST answered");

    // Every updatable field changes on PUT.
    let change = json!({
        "parent_id": own,
        "name": "Renamed",
        "branding_domain_url": "other.example.org",
        "branding_domain_id": "fedcba9876543210fedcba98",
        "account_number": "ACCT-0043",
        "address1": "2 Side St",
        "address2": null,
        "city": "Reno",
        "state": "NV",
        "zip_code": "89501",
        "office_phone": "7755550100",
        "office_ext_phone": "",
        "fax": "7755550199",
        "aba": "121000358",
        "dda": "999",
        "tz": "Europe/Oslo",
        "receipt_logo": "https://cdn.example.com/new.png",
        "email_reply_to": "help@example.org",
        "location_api_id": "LOC-API-0002-abcdefghijkl",
        "location_c1": "uno",
        "location_c2": "dos",
        "location_c3": "tres",
        "developer_company_id": "0123456789abcdef0123456789abcdef",
        "contact_email_trx_receipt_default": false,
        "recurring_notification_days_default": "3",
        "show_contact_notes": 0,
        "show_contact_files": 1,
    });
    let updated = t
        .put(&format!("/v2/locations/{id}"), json!({ "location": change }))
        .expect(200);
    let u = updated.body["location"].clone();
    for (k, v) in change.as_object().unwrap() {
        if k.ends_with("_default") || k.starts_with("show_") {
            continue;
        }
        let want = match v.as_str() {
            Some("") => Value::Null,
            _ if k == "dda" => json!("XXX"),
            _ => v.clone(),
        };
        assert_eq!(u[k.as_str()], want, "{k} after PUT");
    }
    assert_eq!(u["contact_email_trx_receipt_default"], false);
    assert_eq!(u["recurring_notification_days_default"], 3);
    assert_eq!(u["show_contact_notes"], false);
    assert_eq!(u["show_contact_files"], true);
    assert_eq!(u["location_api_key"], c["location_api_key"]);
    assert_eq!(u["ticket_hash_key"], c["ticket_hash_key"]);
    assert_eq!(u["created_ts"], c["created_ts"]);
    assert_eq!(get_location(&t, &id), u, "GET answers what PUT answered");

    // Only parent_id and name: everything else stays.
    let r = t
        .put(
            &format!("/v2/locations/{id}"),
            json!({ "location": { "parent_id": own, "name": "Again" } }),
        )
        .expect(200);
    let mut expected = u.clone();
    expected["name"] = json!("Again");
    expected["modified_ts"] = r.body["location"]["modified_ts"].clone();
    assert_eq!(r.body["location"], expected);
}

fn location_field_bounds(app: &TestApp) {
    let t = app.bootstrap();
    // (field, value, accepted)
    let cases: Vec<(&str, Value, bool)> = vec![
        ("name", json!(text(64, 'ñ')), true),
        ("name", json!(text(65, 'n')), false),
        ("account_number", json!(text(32, '1')), true),
        ("account_number", json!(text(33, '1')), false),
        ("address1", json!(text(32, 'a')), true),
        ("address1", json!(text(33, 'a')), false),
        ("address2", json!(text(32, 'a')), true),
        ("address2", json!(text(33, 'a')), false),
        ("city", json!(text(100, 'c')), true),
        ("city", json!(text(101, 'c')), false),
        ("state", json!(text(100, 's')), true),
        ("state", json!(text(101, 's')), false),
        ("zip_code", json!("12345"), true),
        ("zip_code", json!("12345-6789"), true),
        ("zip_code", json!("1234"), false),
        ("zip_code", json!("12345-67890"), false),
        ("office_phone", json!("5125550100"), true),
        ("office_phone", json!(5125550100_i64), true),
        ("office_phone", json!("512555010"), false),
        ("office_phone", json!("51255501000"), false),
        ("office_phone", json!("512555010a"), false),
        ("office_ext_phone", json!(text(10, '9')), true),
        ("office_ext_phone", json!(text(11, '9')), false),
        ("fax", json!("5125550199"), true),
        ("fax", json!("512555019"), false),
        ("fax", json!("51255501999"), false),
        ("fax", json!("512-555-01"), false),
        ("aba", json!("072000326"), true),
        ("aba", json!("07200032"), false),
        ("aba", json!("0720003260"), false),
        ("aba", json!("07200032x"), false),
        ("dda", json!("123"), true),
        ("dda", json!(text(32, '7')), true),
        ("dda", json!("12"), false),
        ("dda", json!(text(33, '7')), false),
        ("tz", json!("America/Argentina/Salta"), true),
        ("tz", json!("UTC"), true),
        ("tz", json!("Mars/Olympus"), false),
        ("tz", json!("Central Time"), false),
        ("tz", json!("America/Argentina/Ushuaia"), false),
        ("receipt_logo", json!(text(256, 'l')), true),
        ("receipt_logo", json!(text(257, 'l')), false),
        (
            "email_reply_to",
            json!(format!("{}@example.com", text(48, 'e'))),
            true,
        ),
        (
            "email_reply_to",
            json!(format!("{}@example.com", text(49, 'e'))),
            false,
        ),
        ("location_api_id", json!(text(24, 'A')), true),
        ("location_api_id", json!(text(36, 'A')), true),
        ("location_api_id", json!(text(23, 'A')), false),
        ("location_api_id", json!(text(37, 'A')), false),
        ("location_c1", json!(text(128, 'x')), true),
        ("location_c1", json!(text(129, 'x')), false),
        ("location_c2", json!(text(129, 'x')), false),
        ("location_c3", json!(text(129, 'x')), false),
        ("branding_domain_id", json!("short"), false),
        ("developer_company_id", json!(text(37, 'a')), false),
        ("contact_email_trx_receipt_default", json!("maybe"), false),
        ("show_contact_notes", json!(2), false),
        ("show_contact_files", json!("yes please"), false),
        ("recurring_notification_days_default", json!("soon"), false),
        ("recurring_notification_days_default", json!(1.5), false),
    ];
    let child = t.location(&t.location_id(), "Target");
    for (field, value, ok) in &cases {
        let body = location_body(&t, json!({ *field: value }));
        let r = t.post("/v2/locations", json!({ "location": body }));
        if *ok {
            let r = r.expect(201);
            let want = if value.is_number() && *field != "recurring_notification_days_default" {
                json!(value.to_string())
            } else if *field == "dda" {
                // The bank account number is answered masked.
                json!(mask(value.as_str().unwrap()))
            } else {
                value.clone()
            };
            assert_eq!(r.body["location"][*field], want, "{field} accepted as sent");
        } else {
            assert_eq!(r.status, 422, "{field}={value} is refused on POST: {}", r.text);
            assert_eq!(error_fields(&r), vec![field.to_string()], "{field}: {}", r.text);
            // The same bounds hold on PUT.
            let mut body = json!({ "parent_id": t.location_id(), "name": "Target" });
            body[*field] = value.clone();
            let r = t.put(&format!("/v2/locations/{child}"), json!({ "location": body }));
            assert_eq!(r.status, 422, "{field}={value} is refused on PUT: {}", r.text);
            assert_eq!(error_fields(&r), vec![field.to_string()], "{field}: {}", r.text);
        }
    }
    // Unknown fields and system fields are refused, naming them.
    for field in [
        "id",
        "created_ts",
        "modified_ts",
        "path",
        "created_user_id",
        "colour",
    ] {
        let body = location_body(&t, json!({ field: "0123456789abcdef01234567" }));
        let r = t.post("/v2/locations", json!({ "location": body })).expect(422);
        assert!(!r.errors(field).is_empty(), "{field}: {}", r.text);
    }
}

/// `dda`, the location's deposit account number, is sealed at rest and
/// answered masked everywhere: reads, change logs and postbacks; one
/// stored in clear before it was sealed is sealed when the server starts.
fn the_bank_account_number_is_sealed_and_masked(app: &mut TestApp) {
    use crate::support::receiver::{config, Receiver};
    let t = app.bootstrap();
    let own = t.location_id();
    let path = format!("/v2/locations/{own}");
    let number = "5556667778889";
    let r = t.put(&path, json!({ "location": { "dda": number } })).expect(200);
    assert_eq!(r.body["location"]["dda"], "XXXXXXXXX8889");
    let stored = db(app).text("SELECT dda FROM locations WHERE id = ?", &[&own]);
    assert!(!stored.contains(number) && !stored.contains("8889"), "{stored}");
    t.put(&path, json!({ "location": { "dda": "1112223334445" } }))
        .expect(200);
    let logged = t.get(&format!("{path}?expand=changelogs")).expect(200);
    assert!(!logged.text.contains(number), "{}", logged.text);
    // A postback carrying the location shows it masked.
    let rx = Receiver::start("/with-location");
    config(
        &t,
        json!({ "resource": "contact", "url": rx.url, "expands": "location" }),
    );
    t.contact(json!({}));
    let got = rx.wait_for(1, std::time::Duration::from_secs(10));
    assert_eq!(got[0].data()["location"]["dda"], "XXXXXXXXX4445");
    assert!(!got[0].body.contains("1112223334445"));
    // Kept in clear by an earlier release: sealed at start.
    db(app).exec(
        "UPDATE locations SET dda = ? WHERE id = ?",
        &["123456789012", &own],
    );
    app.kill();
    app.spawn();
    let stored = db(app).text("SELECT dda FROM locations WHERE id = ?", &[&own]);
    assert!(!stored.contains("123456789012"), "{stored}");
    let t = Tenant {
        base: app.base.clone(),
        creds: t.creds.clone(),
    };
    assert_eq!(get_location(&t, &own)["dda"], "XXXXXXXX9012");
}

/// All but the last four characters as `X` (shorter than eight: all).
fn mask(clear: &str) -> String {
    let n = clear.chars().count();
    let keep = if n >= 8 { 4 } else { 0 };
    "X".repeat(n - keep) + &clear[clear.len() - keep..]
}

fn location_keys_are_generated_and_sealed(app: &TestApp) {
    let t = app.bootstrap();
    let own = t.location_id();
    let keys = ["location_api_key", "ticket_hash_key"];
    let a = t
        .post(
            "/v2/locations",
            json!({ "location": location_body(&t, json!({ "name": "A" })) }),
        )
        .expect(201)
        .body["location"]
        .clone();
    let b = t
        .post(
            "/v2/locations",
            json!({ "location": location_body(&t, json!({ "name": "B" })) }),
        )
        .expect(201)
        .body["location"]
        .clone();
    let mine = get_location(&t, &own);
    let mut all = BTreeSet::new();
    for rec in [&a, &b, &mine] {
        for k in keys {
            let v = str_of(&rec[k]);
            assert_eq!(v.chars().count(), 36, "{k} has 36 characters: {v}");
            all.insert(v);
        }
    }
    assert_eq!(all.len(), 6, "every key differs per location and per kind");
    // Stable: reading again (and through the list) gives the same keys.
    let a_id = str_of(&a["id"]);
    let again = get_location(&t, &a_id);
    for k in keys {
        assert_eq!(again[k], a[k], "{k} is stable");
    }
    let list = t.get("/v2/locations").expect(200);
    let listed = list.body["locations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["id"] == a["id"])
        .unwrap()
        .clone();
    for k in keys {
        assert_eq!(listed[k], a[k], "{k} in the list");
    }

    // They cannot be set, neither on POST nor on PUT.
    let forced = "11111111-2222-3333-4444-555555555555";
    for k in keys {
        let r = t
            .post(
                "/v2/locations",
                json!({ "location": location_body(&t, json!({ k: forced })) }),
            )
            .expect(422);
        assert!(!r.errors(k).is_empty(), "POST {k}: {}", r.text);
        let r = t
            .put(
                &format!("/v2/locations/{a_id}"),
                json!({ "location": { "parent_id": own, "name": "A", k: forced } }),
            )
            .expect(422);
        assert!(!r.errors(k).is_empty(), "PUT {k}: {}", r.text);
    }
    let after = get_location(&t, &a_id);
    for k in keys {
        assert_eq!(after[k], a[k], "{k} unchanged by refused writes");
    }

    // Not stored in clear anywhere in the database.
    let mut conn = db(app);
    for key in &all {
        let found = conn.columns_containing(key);
        assert!(found.is_empty(), "key {key} stored in clear in {found:?}");
    }
    assert!(
        conn.columns_containing(&a_id)
            .contains(&"locations.id".to_string()),
        "the scan itself works"
    );
}

fn location_default_product_transactions(app: &TestApp) {
    let t = app.bootstrap();
    let other = app.bootstrap();
    let own = t.location_id();
    let cc = t.cred("cc_product_transaction_id");
    let ach = t.cred("ach_product_transaction_id");
    let mine = get_location(&t, &own);
    assert_eq!(mine["default_cc"], cc, "bootstrap sets default_cc");
    assert_eq!(mine["default_ach"], ach, "bootstrap sets default_ach");
    let root = str_of(&mine["parent_id"]);
    let name = str_of(&mine["name"]);
    let put_own = |extra: Value| {
        let mut b = json!({ "parent_id": root, "name": name });
        for (k, v) in extra.as_object().unwrap() {
            b[k.as_str()] = v.clone();
        }
        t.put(&format!("/v2/locations/{own}"), json!({ "location": b }))
    };
    let random = uuid::Uuid::new_v4().simple().to_string();
    for (field, bad) in [
        ("default_cc", ach.clone()),
        ("default_ach", cc.clone()),
        ("default_cc", other.cred("cc_product_transaction_id")),
        ("default_ach", other.cred("ach_product_transaction_id")),
        ("default_cc", random.clone()),
        ("default_ach", "not-an-id".to_string()),
    ] {
        let r = put_own(json!({ field: bad }));
        assert_eq!(r.status, 422, "{field}={bad}: {}", r.text);
        assert_eq!(error_fields(&r), vec![field.to_string()], "{}", r.text);
    }
    let mine = get_location(&t, &own);
    assert_eq!(
        (&mine["default_cc"], &mine["default_ach"]),
        (&json!(cc), &json!(ach))
    );
    put_own(json!({ "default_cc": cc, "default_ach": ach })).expect(200);
    let r = put_own(json!({ "default_cc": "" })).expect(200);
    assert_eq!(r.body["location"]["default_cc"], Value::Null);
    assert_eq!(r.body["location"]["default_ach"], ach);
    let r = put_own(json!({ "default_cc": cc })).expect(200);
    assert_eq!(r.body["location"]["default_cc"], cc);

    // A child cannot name its parent's product transactions.
    for (field, pt) in [("default_cc", &cc), ("default_ach", &ach)] {
        let r = t
            .post(
                "/v2/locations",
                json!({ "location": location_body(&t, json!({ field: pt })) }),
            )
            .expect(422);
        assert_eq!(error_fields(&r), vec![field.to_string()], "{}", r.text);
    }
    let child = t.location(&own, "Child");
    let r = t
        .put(
            &format!("/v2/locations/{child}"),
            json!({ "location": { "parent_id": own, "name": "Child", "default_cc": cc } }),
        )
        .expect(422);
    assert!(!r.errors("default_cc").is_empty(), "{}", r.text);
    // ... but its own ones, of the right method.
    let child_cc = insert_product_transaction(app, &child, "cc");
    let child_ach = insert_product_transaction(app, &child, "ach");
    let r = t
        .put(
            &format!("/v2/locations/{child}"),
            json!({ "location": { "parent_id": own, "name": "Child", "default_cc": child_ach } }),
        )
        .expect(422);
    assert!(!r.errors("default_cc").is_empty(), "{}", r.text);
    let r = t
        .put(
            &format!("/v2/locations/{child}"),
            json!({ "location": { "parent_id": own, "name": "Child", "default_cc": child_cc, "default_ach": child_ach } }),
        )
        .expect(200);
    assert_eq!(r.body["location"]["default_cc"], child_cc);
    assert_eq!(r.body["location"]["default_ach"], child_ach);
}

fn location_expands(app: &TestApp) {
    let t = app.bootstrap();
    let own = t.location_id();
    let cc = t.cred("cc_product_transaction_id");
    let ach = t.cred("ach_product_transaction_id");
    let child = t.location(&own, "Branch");
    t.put(
        &format!("/v2/locations/{child}"),
        json!({ "location": { "parent_id": own, "name": "Branch 2", "city": "Oslo" } }),
    )
    .expect(200);
    let all = "branding_domain,created_user,developer_company,product_transactions,product_recurring,product_file,parent,terminal,changelogs";
    let r = t.get(&format!("/v2/locations/{child}?expand={all}")).expect(200);
    let c = &r.body["location"];
    for name in all.split(',') {
        assert!(c.get(name).is_some(), "expand {name} is embedded: {}", r.text);
    }
    assert_eq!(c["created_user"]["id"], t.user_id());
    assert_eq!(c["parent"]["id"], own);
    assert_eq!(c["parent"]["name"], get_location(&t, &own)["name"]);
    assert_eq!(c["product_transactions"], json!([]), "the child holds none");
    if let Some(bd) = c["branding_domain"].as_object() {
        assert_eq!(bd["url"], c["branding_domain_url"], "branding_domain embed");
    }
    let logs = c["changelogs"].as_array().expect("changelogs array");
    assert_eq!(logs.len(), 2, "{}", c["changelogs"]);
    // Newest first.
    assert_eq!(logs[1]["action"], "CREATE");
    assert_eq!(logs[1]["model"], "Location");
    assert_eq!(logs[1]["model_id"], child);
    assert_eq!(logs[0]["action"], "UPDATE");
    assert_eq!(logs[0]["user_id"], t.user_id());
    let mut details: Vec<(String, Value)> = logs[0]["changelog_details"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (str_of(&d["field"]), d["old_value"].clone()))
        .collect();
    details.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        details,
        vec![
            ("city".to_string(), Value::Null),
            ("name".to_string(), json!("Branch"))
        ]
    );

    // The bootstrapped location holds both product transactions.
    let r = t
        .get(&format!("/v2/locations/{own}?expand=product_transactions"))
        .expect(200);
    let pts = r.body["location"]["product_transactions"]
        .as_array()
        .expect("product_transactions array");
    let mut got: Vec<(String, String)> = pts
        .iter()
        .map(|p| (str_of(&p["id"]), str_of(&p["payment_method"])))
        .collect();
    got.sort();
    let mut want = vec![(cc.clone(), "cc".to_string()), (ach.clone(), "ach".to_string())];
    want.sort();
    assert_eq!(got, want);
    // Expands work on the list too.
    let r = t
        .get("/v2/locations?expand=product_transactions,parent")
        .expect(200);
    let listed = r.body["locations"].as_array().unwrap();
    let me = listed.iter().find(|l| l["id"] == own).unwrap();
    assert_eq!(me["product_transactions"].as_array().unwrap().len(), 2);
    let ch = listed.iter().find(|l| l["id"] == child).unwrap();
    assert_eq!(ch["parent"]["id"], own);

    let bad = t.get(&format!("/v2/locations/{child}?expand=tags")).expect(422);
    assert!(!bad.errors("expand").is_empty());
}

fn location_tree_moves(app: &TestApp) {
    let t = app.bootstrap();
    let own = t.location_id();
    let a = t.location(&own, "A");
    let b = t.location(&own, "B");
    let g = t.location(&a, "G");
    let gg = t.location(&g, "GG");
    let contact = t
        .post(
            "/v2/contacts",
            json!({ "contact": { "location_id": gg, "last_name": "Deep" } }),
        )
        .expect(201)
        .body["contact"]["id"]
        .clone();
    let contact = str_of(&contact);
    let ua = user_at(&t, &a, "2");
    let ub = user_at(&t, &b, "2");
    // Users inside the moved subtree keep their own view of it.
    let ug = user_at(&t, &g, "2");
    let ugg = user_at(&t, &gg, "2");
    let sees = |who: &Tenant, path: &str| who.get(path).status;
    let paths = [
        format!("/v2/locations/{g}"),
        format!("/v2/locations/{gg}"),
        format!("/v2/contacts/{contact}"),
    ];
    for p in &paths {
        assert_eq!(sees(&ua, p), 200, "before: A sees {p}");
        assert_eq!(sees(&ub, p), 404, "before: B does not see {p}");
    }

    let r = t
        .put(
            &format!("/v2/locations/{g}"),
            json!({ "location": { "parent_id": b, "name": "G" } }),
        )
        .expect(200);
    assert_eq!(r.body["location"]["parent_id"], b);
    for p in &paths {
        assert_eq!(sees(&ub, p), 200, "after: B sees {p}");
        assert_eq!(sees(&ua, p), 404, "after: A no longer sees {p}");
        assert_eq!(sees(&ug, p), 200, "after: G still sees {p}");
    }
    assert_eq!(sees(&ugg, &paths[2]), 200, "GG still sees its contact");
    assert_eq!(sees(&ugg, &paths[0]), 404, "GG does not see G");
    assert_eq!(
        ids(&ug.get("/v2/locations").expect(200), "locations"),
        [g.clone(), gg.clone()].into_iter().collect()
    );
    assert_eq!(get_location(&t, &gg)["parent_id"], g, "the subtree moves along");
    assert_eq!(
        ids(&ub.get("/v2/locations").expect(200), "locations"),
        [b.clone(), g.clone(), gg.clone()].into_iter().collect()
    );
    assert_eq!(
        ids(&ua.get("/v2/locations").expect(200), "locations"),
        [a.clone()].into_iter().collect()
    );
    assert_eq!(
        ids(&ub.get("/v2/contacts").expect(200), "contacts"),
        [contact.clone()].into_iter().collect()
    );
    assert!(ids(&ua.get("/v2/contacts").expect(200), "contacts").is_empty());
    let r = ub.get(&format!("/v2/locations/{g}?expand=parent")).expect(200);
    assert_eq!(r.body["location"]["parent"]["id"], b);
    // A location created below the moved subtree lands in the new place.
    let ggg = t.location(&gg, "GGG");
    assert_eq!(sees(&ub, &format!("/v2/locations/{ggg}")), 200);
    assert_eq!(sees(&ua, &format!("/v2/locations/{ggg}")), 404);
    // The admin above both still sees everything.
    assert_eq!(
        ids(&t.get("/v2/locations").expect(200), "locations"),
        [
            own.clone(),
            a.clone(),
            b.clone(),
            g.clone(),
            gg.clone(),
            ggg.clone()
        ]
        .into_iter()
        .collect()
    );

    // A second move, by a user at the new parent: G under... B's own
    // subtree only; then the admin moves it up to the merchant itself.
    let ub_write = user_at(&t, &b, "132");
    let b2 = ub_write.location(&b, "B2");
    ub_write
        .put(
            &format!("/v2/locations/{g}"),
            json!({ "location": { "parent_id": b2, "name": "G" } }),
        )
        .expect(200);
    assert_eq!(get_location(&t, &g)["parent_id"], b2);
    let ub2 = user_at(&t, &b2, "2");
    for p in &paths {
        assert_eq!(sees(&ub2, p), 200, "B2 sees {p}");
    }
    t.put(
        &format!("/v2/locations/{g}"),
        json!({ "location": { "parent_id": own, "name": "G" } }),
    )
    .expect(200);
    for p in &paths {
        assert_eq!(sees(&ub, p), 404, "B lost {p}");
        assert_eq!(sees(&ub2, p), 404, "B2 lost {p}");
        assert_eq!(sees(&t, p), 200, "the merchant sees {p}");
    }
    assert_eq!(sees(&ub, &format!("/v2/locations/{ggg}")), 404);
}

fn location_moves_refused(app: &TestApp) {
    let t = app.bootstrap();
    let other = app.bootstrap();
    let own = t.location_id();
    let a = t.location(&own, "A");
    let b = t.location(&own, "B");
    let g = t.location(&a, "G");
    let gg = t.location(&g, "GG");
    let move_to = |who: &Tenant, id: &str, name: &str, parent: &str| {
        who.put(
            &format!("/v2/locations/{id}"),
            json!({ "location": { "parent_id": parent, "name": name } }),
        )
    };
    for (id, name, parent, why) in [
        (&g, "G", &g, "below itself"),
        (&g, "G", &gg, "below its child"),
        (&a, "A", &gg, "below its grandchild"),
        (&a, "A", &g, "below its child"),
    ] {
        let r = move_to(&t, id, name, parent);
        assert_eq!(r.status, 422, "{why}: {}", r.text);
        assert!(!r.errors("parent_id").is_empty(), "{why}: {}", r.text);
    }
    for parent in [other.location_id(), uuid::Uuid::new_v4().simple().to_string()] {
        let r = move_to(&t, &g, "G", &parent);
        assert_eq!(r.status, 422, "{}", r.text);
        assert!(!r.errors("parent_id").is_empty(), "{}", r.text);
    }
    // A caller cannot move its own location.
    let mine = get_location(&t, &own);
    let root = str_of(&mine["parent_id"]);
    let name = str_of(&mine["name"]);
    for parent in [&a, &gg] {
        let r = move_to(&t, &own, &name, parent);
        assert_eq!(r.status, 422, "{}", r.text);
        assert!(!r.errors("parent_id").is_empty(), "{}", r.text);
    }
    let ua = user_at(&t, &a, "132");
    let a2 = ua.location(&a, "A2");
    // (Its own child, a sibling outside its scope, another tenant.)
    for parent in [&a2, &b, &other.location_id()] {
        let r = move_to(&ua, &a, "A", parent);
        assert_eq!(r.status, 422, "a user moving its own location: {}", r.text);
        assert!(!r.errors("parent_id").is_empty(), "{}", r.text);
    }
    // Nothing moved.
    assert_eq!(get_location(&t, &own)["parent_id"], root);
    assert_eq!(get_location(&t, &a)["parent_id"], own);
    assert_eq!(get_location(&t, &g)["parent_id"], a);
    assert_eq!(get_location(&t, &gg)["parent_id"], g);
    assert_eq!(ua.get(&format!("/v2/locations/{gg}")).status, 200);
    assert_eq!(
        t.get("/v2/locations").expect(200).body["meta"]["pagination"]["totalCount"],
        6
    );
    // Renaming one's own location (parent unchanged) is an ordinary update.
    let r = move_to(&t, &own, "HQ renamed", &root).expect(200);
    assert_eq!(r.body["location"]["name"], "HQ renamed");
    move_to(&ua, &a, "A renamed", &own).expect(200);
    assert_eq!(get_location(&t, &a)["name"], "A renamed");
}

/// Another node's move of `id` under `parent`, as `PUT parent_id` writes
/// it (the subtree's paths, then the row), left uncommitted on `conn`:
/// it holds what a move holds until the test commits.
fn move_uncommitted(conn: &mut Db, id: &str, parent: &str) {
    conn.exec("BEGIN", &[]);
    let old = conn.text("SELECT path FROM locations WHERE id = ?", &[id]);
    let new = format!(
        "{}{id}/",
        conn.text("SELECT path FROM locations WHERE id = ?", &[parent])
    );
    let upper = format!("{}0", &old[..old.len() - 1]);
    conn.exec(
        "UPDATE locations SET path = CAST(? AS TEXT) || substr(path, length(CAST(? AS TEXT)) + 1) WHERE path > ? AND path < ?",
        &[&new, &old, &old, &upper],
    );
    conn.exec(
        "UPDATE locations SET parent_id = ?, path = ? WHERE id = ?",
        &[parent, &new, id],
    );
}

/// Every location's path is its parent's path and its own id.
#[track_caller]
fn assert_paths_follow_parents(app: &TestApp) {
    let wrong = db(app).count(
        "SELECT COUNT(*) FROM locations c JOIN locations p ON p.id = c.parent_id \
         WHERE c.path <> p.path || c.id || '/'",
        &[],
    );
    assert_eq!(wrong, 0, "locations whose path is not their parent's");
}

/// PostgreSQL: a location created under a parent that another node is
/// moving waits for the move and takes the parent's new path, so the
/// parent's users see it and its former ancestors' do not. (The create
/// read the parent's path unlocked and kept the old one.) On SQLite the
/// writer runs one job at a time: nothing can come in between.
fn a_location_created_under_a_moving_parent_follows_it(app: &TestApp) {
    if app.engine != Engine::Postgres {
        return;
    }
    let t = app.bootstrap();
    let own = t.location_id();
    let a = t.location(&own, "A");
    let b = t.location(&own, "B");
    let p = t.location(&a, "P");
    let ua = user_at(&t, &a, "2");
    let up = user_at(&t, &p, "2");
    let mut moving = db(app);
    move_uncommitted(&mut moving, &p, &b);
    let creating = {
        let (t, p) = (t.clone(), p.clone());
        std::thread::spawn(move || {
            let body = json!({ "location": { "parent_id": p, "name": "C", "branding_domain_url": "pay.example.com" } });
            t.post("/v2/locations", body)
        })
    };
    wait_for_lock_wait(app, &creating, "the create did not wait for the move");
    moving.exec("COMMIT", &[]);
    let c = str_of(&creating.join().unwrap().expect(201).body["location"]["id"]);
    assert_paths_follow_parents(app);
    assert_eq!(
        up.get(&format!("/v2/locations/{c}")).status,
        200,
        "P's users see C"
    );
    assert_eq!(
        ua.get(&format!("/v2/locations/{c}")).status,
        404,
        "A's users see neither P nor C"
    );
}

/// PostgreSQL: P moved under Q while another node moves Q under P. The
/// second to come must see the first and refuse (both once passed the
/// "not below itself" check on the paths from before, making a cycle
/// that no one above it could see any longer).
fn crossing_moves_make_no_cycle(app: &TestApp) {
    if app.engine != Engine::Postgres {
        return;
    }
    let t = app.bootstrap();
    let own = t.location_id();
    let p = t.location(&own, "P");
    let q = t.location(&own, "Q");
    let mut moving = db(app);
    move_uncommitted(&mut moving, &q, &p);
    let crossing = {
        let (t, p, q) = (t.clone(), p.clone(), q.clone());
        std::thread::spawn(move || {
            t.put(
                &format!("/v2/locations/{p}"),
                json!({ "location": { "parent_id": q, "name": "P" } }),
            )
        })
    };
    wait_for_lock_wait(app, &crossing, "the move did not wait for the other move");
    moving.exec("COMMIT", &[]);
    let r = crossing.join().unwrap();
    assert_eq!(r.status, 422, "{}", r.text);
    assert!(!r.errors("parent_id").is_empty(), "{}", r.text);
    assert_eq!(get_location(&t, &p)["parent_id"], own);
    assert_eq!(get_location(&t, &q)["parent_id"], p);
    assert_paths_follow_parents(app);
}

/// PostgreSQL: a location moved while another node moves one of its
/// ancestors takes its subtree along from where that move put it (the
/// move rewrote the subtree from the path it had read before, missing
/// the children the other move had already rewritten).
fn a_move_follows_its_ancestor_s_move(app: &TestApp) {
    if app.engine != Engine::Postgres {
        return;
    }
    let t = app.bootstrap();
    let own = t.location_id();
    let a = t.location(&own, "A");
    let b = t.location(&own, "B");
    let x = t.location(&own, "X");
    let p = t.location(&a, "P");
    let child = t.location(&p, "Child");
    let mut moving = db(app);
    move_uncommitted(&mut moving, &a, &x);
    let moved = {
        let (t, p, b) = (t.clone(), p.clone(), b.clone());
        std::thread::spawn(move || {
            t.put(
                &format!("/v2/locations/{p}"),
                json!({ "location": { "parent_id": b, "name": "P" } }),
            )
        })
    };
    wait_for_lock_wait(app, &moved, "the move did not wait for its ancestor's");
    moving.exec("COMMIT", &[]);
    moved.join().unwrap().expect(200);
    assert_paths_follow_parents(app);
    let ub = user_at(&t, &b, "2");
    assert_eq!(ub.get(&format!("/v2/locations/{child}")).status, 200);
}

fn location_delete_refused_while_holding_records(app: &TestApp) {
    let t = app.bootstrap();
    let own = t.location_id();
    let refused = |id: &str, what: &str| {
        let r = t.delete(&format!("/v2/locations/{id}"));
        assert_eq!(r.status, 409, "delete of a location holding {what}: {}", r.text);
        let errors = r.body["errors"]
            .as_object()
            .unwrap_or_else(|| panic!("409 has a validation body: {}", r.text));
        assert!(!errors.is_empty(), "{}", r.text);
        assert!(
            errors
                .values()
                .all(|m| m.as_array().is_some_and(|a| !a.is_empty())),
            "{}",
            r.text
        );
        t.get(&format!("/v2/locations/{id}")).expect(200);
    };
    let gone = |id: &str| {
        t.delete(&format!("/v2/locations/{id}")).expect(204);
        t.get(&format!("/v2/locations/{id}")).expect(404);
    };

    // Child locations.
    let l1 = t.location(&own, "With child");
    let l1c = t.location(&l1, "The child");
    refused(&l1, "child locations");
    t.get(&format!("/v2/locations/{l1c}")).expect(200);
    gone(&l1c);
    gone(&l1);

    // Contacts.
    let l2 = t.location(&own, "With contact");
    let c = t
        .post(
            "/v2/contacts",
            json!({ "contact": { "location_id": l2, "last_name": "Held" } }),
        )
        .expect(201)
        .body["contact"]["id"]
        .clone();
    let c = str_of(&c);
    refused(&l2, "contacts");
    t.get(&format!("/v2/contacts/{c}")).expect(200);
    t.delete(&format!("/v2/contacts/{c}")).expect(204);
    gone(&l2);

    // Users.
    let l3 = t.location(&own, "With user");
    let (u, key) = t.user(&l3, Some("2"));
    refused(&l3, "users");
    t.get(&format!("/v2/users/{u}")).expect(200);
    t.as_user(&u, &key).get("/v2/users/me").expect(200);
    t.delete(&format!("/v2/users/{u}")).expect(204);
    gone(&l3);

    // Product transactions.
    let l4 = t.location(&own, "With account");
    let pt = insert_product_transaction(app, &l4, "cc");
    t.get(&format!("/v2/producttransactions/{pt}")).expect(200);
    refused(&l4, "product transactions");
    t.get(&format!("/v2/producttransactions/{pt}")).expect(200);
    db(app).exec("DELETE FROM product_transactions WHERE id = ?", &[&pt]);
    gone(&l4);

    // Notes.
    let l5 = t.location(&own, "With note");
    let n = t
        .post(
            "/v2/notes",
            json!({ "note": { "resource": "Location", "resource_id": l5, "note": "keep" } }),
        )
        .expect(201)
        .body["note"]["id"]
        .clone();
    let n = str_of(&n);
    // A note about the location is part of it: it goes with the location,
    // leaving a DELETE in the change log.
    gone(&l5);
    t.get(&format!("/v2/notes/{n}")).expect(404);

    // A held record deeper down also holds (through the child).
    let l6 = t.location(&own, "Grandparent");
    let l6c = t.location(&l6, "Parent");
    t.post(
        "/v2/contacts",
        json!({ "contact": { "location_id": l6c, "last_name": "Deep" } }),
    )
    .expect(201);
    refused(&l6, "a child that holds a contact");
    refused(&l6c, "a contact");
}

fn location_delete_empty_and_own(app: &TestApp) {
    let t = app.bootstrap();
    let other = app.bootstrap();
    let own = t.location_id();
    let c = t.location(&own, "Empty");
    let r = t.delete(&format!("/v2/locations/{c}")).expect(204);
    assert!(r.text.is_empty(), "204 has no body");
    t.get(&format!("/v2/locations/{c}")).expect(404);
    t.delete(&format!("/v2/locations/{c}")).expect(404);
    t.put(
        &format!("/v2/locations/{c}"),
        json!({ "location": { "parent_id": own, "name": "x" } }),
    )
    .expect(404);
    assert!(!ids(&t.get("/v2/locations").expect(200), "locations").contains(&c));

    // A leaf below a child, then the child.
    let p = t.location(&own, "Parent");
    let leaf = t.location(&p, "Leaf");
    t.delete(&format!("/v2/locations/{leaf}")).expect(204);
    t.delete(&format!("/v2/locations/{p}")).expect(204);

    // One's own location cannot be deleted.
    let r = t.delete(&format!("/v2/locations/{own}")).expect(409);
    assert!(
        r.body["errors"].as_object().is_some_and(|e| !e.is_empty()),
        "{}",
        r.text
    );
    t.get(&format!("/v2/locations/{own}")).expect(200);
    // Another tenant's location is not found.
    t.delete(&format!("/v2/locations/{}", other.location_id()))
        .expect(404);
    other
        .get(&format!("/v2/locations/{}", other.location_id()))
        .expect(200);
}

fn location_list_is_scoped(app: &TestApp) {
    let t = app.bootstrap();
    let other = app.bootstrap();
    let own = t.location_id();
    let a = t.location(&own, "A");
    let b = t.location(&own, "B");
    let g = t.location(&a, "G");
    let r = t.get("/v2/locations").expect(200);
    assert_eq!(
        ids(&r, "locations"),
        [own.clone(), a.clone(), b.clone(), g.clone()]
            .into_iter()
            .collect()
    );
    assert_eq!(r.body["meta"]["pagination"]["totalCount"], 4);
    assert_eq!(r.body["meta"]["sort"]["attributes"]["id"], "desc");
    let listed: Vec<String> = r.body["locations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| str_of(&l["id"]))
        .collect();
    let mut sorted = listed.clone();
    sorted.sort();
    sorted.reverse();
    assert_eq!(listed, sorted, "default sort id desc");
    let r = t.get(&format!("/v2/locations?parent_id={own}")).expect(200);
    assert_eq!(ids(&r, "locations"), [a.clone(), b.clone()].into_iter().collect());
    let r = t.get("/v2/locations?name=g").expect(200);
    assert!(ids(&r, "locations").contains(&g));
    let r = other.get("/v2/locations").expect(200);
    assert_eq!(ids(&r, "locations"), [other.location_id()].into_iter().collect());
    for id in [&own, &a, &g] {
        other.get(&format!("/v2/locations/{id}")).expect(404);
    }
    // A user at a child sees only its subtree.
    let ua = user_at(&t, &a, "2");
    assert_eq!(
        ids(&ua.get("/v2/locations").expect(200), "locations"),
        [a.clone(), g.clone()].into_iter().collect()
    );
    ua.get(&format!("/v2/locations/{own}")).expect(404);
    ua.get(&format!("/v2/locations/{b}")).expect(404);
    // A read-only user cannot write.
    ua.post(
        "/v2/locations",
        json!({ "location": location_body(&t, json!({ "parent_id": a })) }),
    )
    .expect(403);
}

// ---------------------------------------------------------------------
// Location infos and product transactions.

const PRODUCT_TRANSACTION_MEMBERS: &[&str] = &[
    "id",
    "payment_method",
    "processor",
    "title",
    "receipt_header",
    "receipt_footer",
    "receipt_add_account_above_signature",
    "receipt_add_recurring_above_signature",
    "receipt_logo",
    "receipt_show_contact_name",
    "industry_type",
    "partner",
    "vt_cvv",
    "vt_street",
    "vt_zip",
    "vt_order_num",
    "display_avs",
    "vt_enable",
    "vt_enable_tip",
    "surcharge",
    "default_transaction_type",
    "vt_require_street",
    "vt_require_zip",
    "vt_enable_sales_tax",
    "vt_override_sales_tax_allowed",
    "current_batch",
    "vt_billing_phone",
    "vt_clerk_number",
    "quick_invoice_allow",
    "active",
    "hosted_payment_page_max_allowed",
    "hosted_payment_page_allow",
    "auto_decline_cvv",
    "level3_allow",
    "level3_default",
    "tax_surcharge_config",
    "_links",
    "velocity_settings",
];

const VELOCITY_MEMBERS: &[&str] = &[
    "debit_hold_days",
    "debit_items_per_day",
    "debit_daily_aggregate",
    "debit_items_per_month",
    "debit_monthly_aggregate",
    "refund_largest_item",
    "refund_items_per_day",
    "refund_daily_aggregate",
    "refund_items_per_month",
    "refund_monthly_aggregate",
    "refund_hold_days",
    "credit_largest_item",
    "credit_daily_aggregate",
    "credit_items_per_day",
    "credit_items_per_month",
    "credit_monthly_aggregate",
];

const INFO_FIELDS: &[&str] = &[
    "id",
    "name",
    "address1",
    "address2",
    "city",
    "state",
    "zip",
    "office_phone",
    "office_ext_phone",
    "fax",
    "tz",
    "branding_domain_url",
    "default_cc",
    "default_ach",
    "contact_email_trx_receipt_default",
    "show_contact_notes",
    "show_contact_files",
    "_links",
    "product_transactions",
    "product_file",
    "product_accountvault",
    "product_recurring",
    "branding_domain",
    "terminals",
    "tags",
];

fn check_info(app: &TestApp, t: &Tenant, info: &Value, expanded: bool) {
    let id = str_of(&info["id"]);
    for f in INFO_FIELDS {
        assert!(info.get(*f).is_some(), "locationinfo.{f} is present: {info}");
    }
    assert!(info["terminals"].is_array() && info["tags"].is_array(), "{info}");
    assert_eq!(
        info["_links"]["self"]["href"],
        format!("{}/v2/locationinfos/{id}", app.base)
    );
    assert_eq!(
        info["_links"]["location"]["href"],
        format!("{}/v2/locations/{id}", app.base)
    );
    let location = t.get(&format!("/v2/locations/{id}")).expect(200);
    let location = &location.body["location"];
    assert_eq!(info["zip"], location["zip_code"]);
    for f in [
        "name",
        "city",
        "default_cc",
        "default_ach",
        "branding_domain_url",
        "tz",
    ] {
        assert_eq!(info[f], location[f], "{f} as on the location");
    }
    for p in info["product_transactions"]
        .as_array()
        .expect("product_transactions")
    {
        for m in PRODUCT_TRANSACTION_MEMBERS {
            assert!(p.get(*m).is_some(), "product_transactions[].{m} is present: {p}");
        }
        assert!(p["_links"]["self"]["href"].is_string(), "{p}");
        for v in VELOCITY_MEMBERS {
            assert!(
                p["velocity_settings"][*v].is_i64(),
                "velocity_settings.{v} is an integer: {}",
                p["velocity_settings"]
            );
        }
        let method = str_of(&p["payment_method"]);
        assert!(method == "cc" || method == "ach", "{method}");
        if method == "ach" {
            let terminals = p["processor_data"]["terminals"]
                .as_array()
                .unwrap_or_else(|| panic!("ACH processor_data.terminals[]: {p}"));
            assert!(!terminals.is_empty());
            for term in terminals {
                assert!(
                    term["terminal_id"].as_str().is_some_and(|s| !s.is_empty()),
                    "{term}"
                );
                let sec = str_of(&term["sec_code"]);
                assert!(
                    ["CCD", "PPD", "TEL", "WEB", "POP", "C21"].contains(&sec.as_str()),
                    "{sec}"
                );
                let actions = term["actions"].as_array().expect("actions[]");
                assert!(
                    !actions.is_empty() && actions.iter().all(Value::is_string),
                    "{term}"
                );
                let required = term["required"].as_array().expect("required[]");
                assert!(required.iter().all(Value::is_string), "{term}");
                if ["CCD", "PPD", "TEL", "WEB"].contains(&sec.as_str()) {
                    // The processor's base requirement (reference 3.4).
                    for f in ["account_holder_name", "routing", "account_number", "account_type"] {
                        assert!(required.contains(&json!(f)), "{f} in required[]: {term}");
                    }
                }
            }
        }
        if expanded {
            assert!(
                p["terminals"].is_array(),
                "expand=terminals adds terminals[]: {p}"
            );
        } else {
            assert!(p.get("terminals").is_none(), "terminals only when expanded: {p}");
        }
    }
}

/// A location's `terminal` expand embeds its terminal records and its
/// location info lists its tags (both were always empty).
fn location_terminals_and_tags_come_from_the_data(app: &TestApp) {
    let t = app.bootstrap();
    let own = t.location_id();
    let (tid, secret) =
        crate::support::sim::terminal(&t, json!({ "serial_number": "SN-EXPAND", "title": "Front desk" }));
    let tag = t
        .post(
            "/v2/tags",
            json!({ "tag": { "location_id": own, "title": "Gala" } }),
        )
        .expect(201)
        .body["tag"]
        .clone();
    // Another location's records are not its own.
    let child = t.location(&own, "Elsewhere");
    t.post(
        "/v2/tags",
        json!({ "tag": { "location_id": child, "title": "Other" } }),
    )
    .expect(201);

    let r = t.get(&format!("/v2/locations/{own}?expand=terminal")).expect(200);
    let terminals = r.body["location"]["terminal"]
        .as_array()
        .expect("terminal array")
        .clone();
    assert_eq!(terminals.len(), 1, "{}", r.text);
    assert_eq!(terminals[0]["id"], tid.as_str());
    assert_eq!(terminals[0]["serial_number"], "SN-EXPAND");
    assert_eq!(terminals[0]["title"], "Front desk");
    assert_eq!(terminals[0]["location_id"], own.as_str());
    assert!(
        !r.text.contains(&secret),
        "the terminal's secret is never embedded"
    );
    let none = t
        .get(&format!("/v2/locations/{child}?expand=terminal"))
        .expect(200);
    assert_eq!(none.body["location"]["terminal"], json!([]));

    let info = t.get("/v2/locationinfos").expect(200).body["locationinfos"][0].clone();
    assert_eq!(info["id"], own.as_str());
    let tags = info["tags"].as_array().expect("tags array");
    assert_eq!(tags.len(), 1, "{info}");
    for key in ["id", "location_id", "title", "created_ts", "modified_ts"] {
        assert_eq!(tags[0][key], tag[key], "{key}");
    }
    assert!(tags[0]["_links"]["self"]["href"]
        .as_str()
        .is_some_and(|h| h.ends_with(&format!("/v2/tags/{}", tag["id"].as_str().unwrap()))));
}

fn locationinfo_shape(app: &TestApp) {
    let t = app.bootstrap();
    let other = app.bootstrap();
    let own = t.location_id();
    let mine = get_location(&t, &own);
    t.put(
        &format!("/v2/locations/{own}"),
        json!({ "location": {
            "parent_id": mine["parent_id"], "name": mine["name"], "address1": "1 Main St",
            "city": "Austin", "state": "TX", "zip_code": "78701", "office_phone": "5125550100",
            "fax": "5125550199", "tz": "America/Chicago", "show_contact_notes": 1
        }}),
    )
    .expect(200);
    let r = t.get("/v2/locationinfos").expect(200);
    let list = r.body["locationinfos"].as_array().expect("locationinfos list");
    assert_eq!(list.len(), 1, "direct by default: {}", r.text);
    assert_eq!(r.body["meta"]["pagination"]["totalCount"], 1);
    let info = &list[0];
    assert_eq!(info["id"], own);
    assert_eq!(info["zip"], "78701");
    assert_eq!(info["show_contact_notes"], true);
    check_info(app, &t, info, false);
    let mut got: Vec<(String, String, bool)> = info["product_transactions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                str_of(&p["id"]),
                str_of(&p["payment_method"]),
                p["active"] == true,
            )
        })
        .collect();
    got.sort();
    let mut want = vec![
        (t.cred("cc_product_transaction_id"), "cc".to_string(), true),
        (t.cred("ach_product_transaction_id"), "ach".to_string(), true),
    ];
    want.sort();
    assert_eq!(got, want);

    let one = t.get(&format!("/v2/locationinfos/{own}")).expect(200);
    assert_eq!(one.body["locationinfo"], *info, "one info equals its list entry");

    let r = t.get("/v2/locationinfos?expand=terminals").expect(200);
    check_info(app, &t, &r.body["locationinfos"][0], true);
    let one = t
        .get(&format!("/v2/locationinfos/{own}?expand=terminals"))
        .expect(200);
    check_info(app, &t, &one.body["locationinfo"], true);
    assert_eq!(one.body["locationinfo"], r.body["locationinfos"][0]);
    t.get("/v2/locationinfos?expand=bogus").expect(422);

    // A read-only integration role may read it; other tenants may not.
    let ro = user_at(&t, &own, "132");
    assert_eq!(
        ro.get("/v2/locationinfos").expect(200).body["locationinfos"][0]["id"],
        own
    );
    other.get(&format!("/v2/locationinfos/{own}")).expect(404);
    // Read only: no writes.
    for (m, p) in [
        ("POST", "/v2/locationinfos".to_string()),
        ("PUT", format!("/v2/locationinfos/{own}")),
        ("DELETE", format!("/v2/locationinfos/{own}")),
    ] {
        let r = t.send(m, &p, Some(r#"{"locationinfo":{"name":"x"}}"#));
        assert_eq!(r.status, 405, "{m} {p}: {}", r.text);
    }
}

fn locationinfo_relationship_and_active(app: &TestApp) {
    let t = app.bootstrap();
    let own = t.location_id();
    let c = t.location(&own, "Child");
    let gc = t.location(&c, "Grandchild");
    let list = |who: &Tenant, q: &str| {
        let r = who.get(&format!("/v2/locationinfos{q}")).expect(200);
        let n = r.body["locationinfos"].as_array().unwrap().len();
        assert_eq!(r.body["meta"]["pagination"]["totalCount"], n, "{}", r.text);
        ids(&r, "locationinfos")
    };
    let just = |ids: &[&String]| ids.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    assert_eq!(list(&t, ""), just(&[&own]));
    assert_eq!(list(&t, "?relationship=direct"), just(&[&own]));
    let children = list(&t, "?relationship=child");
    assert!(children.contains(&c) && !children.contains(&own), "{children:?}");
    let all = list(&t, "?relationship=all");
    // Newest first (created_ts desc).
    let r = t.get("/v2/locationinfos?relationship=all").expect(200);
    assert_eq!(r.body["meta"]["sort"]["attributes"]["created_ts"], "desc");
    let order: Vec<String> = r.body["locationinfos"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| str_of(&i["id"]))
        .collect();
    assert_eq!(order, vec![gc.clone(), c.clone(), own.clone()]);
    assert!(
        all.contains(&own) && all.contains(&c) && all.contains(&gc),
        "{all:?}"
    );
    let one = t.get(&format!("/v2/locationinfos/{gc}")).expect(200);
    assert_eq!(one.body["locationinfo"]["id"], gc);
    assert_eq!(one.body["locationinfo"]["product_transactions"], json!([]));
    let uc = user_at(&t, &c, "132");
    assert_eq!(list(&uc, ""), just(&[&c]));
    let all = list(&uc, "?relationship=all");
    assert!(
        all.contains(&c) && all.contains(&gc) && !all.contains(&own),
        "{all:?}"
    );
    let children = list(&uc, "?relationship=child");
    assert!(children.contains(&gc) && !children.contains(&c) && !children.contains(&own));
    // A location found by its location_api_id (the reference's lookup
    // sample), anywhere in scope unless a relationship narrows it.
    t.put(
        &format!("/v2/locations/{gc}"),
        json!({ "location": { "location_api_id": "shop-42-abcdefghijklmnopq" } }),
    )
    .expect(200);
    assert_eq!(
        list(&t, "?location_api_id=shop-42-abcdefghijklmnopq"),
        just(&[&gc])
    );
    assert_eq!(
        list(&uc, "?location_api_id=shop-42-abcdefghijklmnopq"),
        just(&[&gc])
    );
    assert!(list(
        &t,
        "?location_api_id=shop-42-abcdefghijklmnopq&relationship=direct"
    )
    .is_empty());
    assert!(list(&t, "?location_api_id=nobody").is_empty());
    let other = app.bootstrap();
    assert!(list(&other, "?location_api_id=shop-42-abcdefghijklmnopq").is_empty());
    for bad in ["bogus", "", "DIRECT2"] {
        let r = t.get(&format!("/v2/locationinfos?relationship={bad}"));
        if bad.is_empty() && r.status == 200 {
            continue; // an empty value may mean the default
        }
        assert_eq!(r.status, 422, "relationship={bad}: {}", r.text);
        assert!(!r.errors("relationship").is_empty(), "{}", r.text);
    }

    // product_transaction_active narrows the embedded product transactions.
    let cc = t.cred("cc_product_transaction_id");
    let ach = t.cred("ach_product_transaction_id");
    let pts = |q: &str| -> BTreeSet<String> {
        let r = t.get(&format!("/v2/locationinfos{q}")).expect(200);
        r.body["locationinfos"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["id"] == own)
            .flat_map(|i| i["product_transactions"].as_array().unwrap().clone())
            .map(|p| str_of(&p["id"]))
            .collect()
    };
    assert_eq!(pts(""), just(&[&cc, &ach]));
    assert_eq!(pts("?product_transaction_active=1"), just(&[&cc, &ach]));
    assert!(pts("?product_transaction_active=0").is_empty());
    db(app).exec("UPDATE product_transactions SET active = 0 WHERE id = ?", &[&ach]);
    assert_eq!(pts(""), just(&[&cc, &ach]));
    assert_eq!(pts("?product_transaction_active=1"), just(&[&cc]));
    assert_eq!(pts("?product_transaction_active=0"), just(&[&ach]));
    let r = t
        .get("/v2/locationinfos?product_transaction_active=0")
        .expect(200);
    let p = &r.body["locationinfos"][0]["product_transactions"][0];
    assert_eq!(p["active"], false);
    let r = t
        .get("/v2/locationinfos?product_transaction_active=2")
        .expect(422);
    assert!(!r.errors("product_transaction_active").is_empty(), "{}", r.text);
}

fn product_transactions_read(app: &TestApp) {
    let t = app.bootstrap();
    let other = app.bootstrap();
    let own = t.location_id();
    let cc = t.cred("cc_product_transaction_id");
    let ach = t.cred("ach_product_transaction_id");
    let r = t.get("/v2/producttransactions").expect(200);
    assert_eq!(
        ids(&r, "producttransactions"),
        [cc.clone(), ach.clone()].into_iter().collect()
    );
    assert_eq!(r.body["meta"]["pagination"]["totalCount"], 2);
    for (id, method) in [(&cc, "cc"), (&ach, "ach")] {
        let r = t.get(&format!("/v2/producttransactions/{id}")).expect(200);
        let p = &r.body["producttransaction"];
        assert_eq!(p["id"], *id);
        assert_eq!(p["payment_method"], method);
        assert_eq!(p["location_id"], own);
        assert_eq!(p["active"], true);
        assert!(p["title"].as_str().is_some_and(|s| !s.is_empty()));
        assert_eq!(
            p["_links"]["self"]["href"],
            format!("{}/v2/producttransactions/{id}", app.base)
        );
        other.get(&format!("/v2/producttransactions/{id}")).expect(404);
    }
    let r = t.get("/v2/producttransactions?payment_method=ach").expect(200);
    assert_eq!(
        ids(&r, "producttransactions"),
        [ach.clone()].into_iter().collect()
    );
    let r = other.get("/v2/producttransactions").expect(200);
    assert!(!ids(&r, "producttransactions").contains(&cc));
    // A child's user sees its own accounts only.
    let child = t.location(&own, "Child");
    let child_pt = insert_product_transaction(app, &child, "cc");
    let uc = user_at(&t, &child, "1");
    let r = uc.get("/v2/producttransactions").expect(200);
    assert_eq!(
        ids(&r, "producttransactions"),
        [child_pt.clone()].into_iter().collect()
    );
    uc.get(&format!("/v2/producttransactions/{cc}")).expect(404);
    assert_eq!(
        ids(
            &t.get("/v2/producttransactions").expect(200),
            "producttransactions"
        )
        .len(),
        3
    );
}

/// `current_batch` is the number of the batch new transactions go into:
/// 1 before any, the open batch's while one is open, the next once it
/// settles; location infos and the product transaction agree.
fn product_transactions_current_batch(app: &TestApp) {
    let t = app.bootstrap();
    let cc = t.cred("cc_product_transaction_id");
    let ach = t.cred("ach_product_transaction_id");
    let current = |id: &str| {
        let own = t.get(&format!("/v2/producttransactions/{id}")).expect(200);
        let info = t.get("/v2/locationinfos").expect(200);
        let listed = info.body["locationinfos"][0]["product_transactions"]
            .as_array()
            .expect("product transactions")
            .iter()
            .find(|p| p["id"] == id)
            .expect("the product transaction")["current_batch"]
            .clone();
        assert_eq!(listed, own.body["producttransaction"]["current_batch"]);
        listed
    };
    assert_eq!(current(&cc), 1);
    assert_eq!(current(&ach), 1);
    let sale = |amount: &str| {
        let r = t
            .post(
                "/v2/transactions",
                json!({"transaction": {"action": "sale", "payment_method": "cc",
                    "product_transaction_id": cc, "account_number": "4111111111111111",
                    "exp_date": "1230", "transaction_amount": amount}}),
            )
            .expect(201);
        assert_eq!(r.body["transaction"]["status_id"], 101, "{}", r.text);
        let open = t
            .get(&format!(
                "/v2/transactionbatches?is_open=1&product_transaction_id={cc}"
            ))
            .expect(200);
        str_of(&open.body["transactionbatches"][0]["id"])
    };
    let batch = sale("15.00");
    assert_eq!(current(&cc), 1);
    t.post(&format!("/v2/transactionbatches/{batch}/settle"), json!({}))
        .expect(200);
    assert_eq!(current(&cc), 2, "the next sale opens batch 2");
    let next = sale("16.00");
    let r = t.get(&format!("/v2/transactionbatches/{next}")).expect(200);
    assert_eq!(r.body["transactionbatch"]["batch_num"], 2);
    assert_eq!(current(&cc), 2);
    assert_eq!(
        current(&ach),
        1,
        "each product transaction numbers its own batches"
    );
}

/// A location held by a tag, a postback config or a terminal names them
/// in its 409 (it used to say only "still used by other records").
fn location_delete_names_tags_postbacks_and_terminals(app: &TestApp) {
    let t = app.bootstrap();
    let held = t.location(&t.location_id(), "Tagged");
    let tag = str_of(
        &t.post(
            "/v2/tags",
            json!({ "tag": { "location_id": held, "title": "Gala" } }),
        )
        .expect(201)
        .body["tag"]["id"],
    );
    let hook = str_of(
        &t.post(
            "/v2/postbackconfigs",
            json!({ "postbackconfig": { "location_id": held, "resource": "contact",
                "url": "https://hooks.example.com/contacts", "on_create": 1 } }),
        )
        .expect(201)
        .body["postbackconfig"]["id"],
    );
    let r = t.delete(&format!("/v2/locations/{held}")).expect(409);
    assert_eq!(
        r.errors("id"),
        ["The location cannot be deleted while it holds 1 tag, 1 postback config."],
        "{}",
        r.text
    );
    t.get(&format!("/v2/locations/{held}")).expect(200);
    t.delete(&format!("/v2/tags/{tag}")).expect(204);
    t.delete(&format!("/v2/postbackconfigs/{hook}")).expect(204);
    let (terminal, _) = crate::support::sim::terminal(
        &t,
        json!({ "location_id": held, "serial_number": "SN-HELD", "title": "Till" }),
    );
    let r = t.delete(&format!("/v2/locations/{held}")).expect(409);
    assert_eq!(
        r.errors("id"),
        ["The location cannot be deleted while it holds 1 terminal."],
        "{}",
        r.text
    );
    t.delete(&format!("/v2/terminals/{terminal}")).expect(204);
    t.delete(&format!("/v2/locations/{held}")).expect(204);
}

/// `location_api_id` names one location of a tenant (reference: `*_api_id`
/// keys are unique), so the lookup by it finds one; another tenant may
/// use the same value.
fn location_api_id_is_unique_within_its_tenant(app: &TestApp) {
    let t = app.bootstrap();
    let other = app.bootstrap();
    let own = t.location_id();
    let c1 = t.location(&own, "C1");
    let c2 = t.location(&own, "C2");
    let gc2 = t.location(&c2, "GC2");
    let api_id = "abcdefghijklmnopqrstuvwxyz";
    let set = |t: &Tenant, id: &str, value: &str| {
        t.put(
            &format!("/v2/locations/{id}"),
            json!({ "location": { "location_api_id": value } }),
        )
    };
    set(&t, &gc2, api_id).expect(200);
    for id in [&c1, &own] {
        let r = set(&t, id, api_id).expect(422);
        assert_eq!(
            r.errors("location_api_id"),
            ["Location Api Id has already been taken."],
            "{}",
            r.text
        );
    }
    let r = t
        .post(
            "/v2/locations",
            json!({ "location": { "parent_id": own, "name": "C3", "branding_domain_url": "pay.example.com",
                "location_api_id": api_id } }),
        )
        .expect(422);
    assert!(!r.errors("location_api_id").is_empty(), "{}", r.text);
    set(&t, &gc2, api_id).expect(200);
    set(&other, &other.location_id(), api_id).expect(200);
    let found = t
        .get(&format!("/v2/locationinfos?location_api_id={api_id}"))
        .expect(200);
    assert_eq!(
        found.body["meta"]["pagination"]["totalCount"], 1,
        "{}",
        found.text
    );
    assert_eq!(found.body["locationinfos"][0]["id"], gc2.as_str());
    // Freed, it can be taken.
    set(&t, &gc2, "zyxwvutsrqponmlkjihgfedcba").expect(200);
    set(&t, &c1, api_id).expect(200);
}

/// Migration 38 makes both rules unique on a database that already broke
/// them: of the locations of one tenant sharing a `location_api_id` the
/// oldest keeps it and the others lose it (their change log keeps the
/// value); of offers whose vanity urls differ only in case the oldest
/// keeps its url and the others get one of their own.
fn migration_38_settles_earlier_duplicates(app: &TestApp) {
    let t = app.bootstrap();
    let other = app.bootstrap();
    let own = t.location_id();
    let (first, second) = (t.location(&own, "First"), t.location(&own, "Second"));
    let (older, newer) = if first < second {
        (first, second)
    } else {
        (second, first)
    };
    let mut db = db(app);
    db.exec("DROP INDEX locations_api_id", &[]);
    db.exec("DROP INDEX boarding_offers_vanity_url_folded", &[]);
    let dup = "dup-dup-dup-dup-dup-dup-dup";
    for id in [&older, &newer, &other.location_id()] {
        db.exec(
            "UPDATE locations SET location_api_id = ? WHERE id = ?",
            &[dup, id],
        );
    }
    let offer = |vanity: &str| -> Value {
        let out = app.cli(&["boarding", "offer", "create", "--vanity-url", vanity, "--json"]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let (acme, shouting) = (offer("acme-dup"), offer("ACME-DUP"));
    let shouting_id = str_of(&shouting["offerId"]);
    db.exec(
        "UPDATE boarding_offers SET created_ts = created_ts + 1 WHERE id = ?",
        &[&shouting_id],
    );
    db.exec("DELETE FROM schema_migrations WHERE version = 38", &[]);
    let out = app.cli(&["migrate"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    let api_id_of = |tenant: &Tenant, id: &str| get_location(tenant, id)["location_api_id"].clone();
    assert_eq!(api_id_of(&t, &older), dup);
    assert_eq!(api_id_of(&t, &newer), Value::Null);
    assert_eq!(api_id_of(&other, &other.location_id()), dup, "another tenant's");
    let logs = t
        .get(&format!("/v2/locations/{newer}?expand=changelogs"))
        .expect(200)
        .body["location"]["changelogs"]
        .clone();
    assert_eq!(logs[0]["action"], "UPDATE", "newest first: {logs}");
    assert_eq!(logs[0]["changelog_details"][0]["field"], "location_api_id");
    assert_eq!(logs[0]["changelog_details"][0]["old_value"], dup);
    let r = t
        .put(
            &format!("/v2/locations/{newer}"),
            json!({ "location": { "location_api_id": dup } }),
        )
        .expect(422);
    assert!(!r.errors("location_api_id").is_empty());

    let vanity = |v: &str| {
        app.client()
            .send("GET", &format!("/v1/offer/vanityurl/{v}"), &[], None)
    };
    assert_eq!(vanity("acme-dup").expect(200).body["offerId"], acme["offerId"]);
    assert_eq!(vanity("ACME-DUP").status, 404, "renamed");
    let renamed = format!("ACME-DUP-{}", &shouting_id[..12]);
    assert_eq!(vanity(&renamed).expect(200).body["offerId"], shouting_id.as_str());
    let out = app.cli(&[
        "boarding",
        "offer",
        "create",
        "--vanity-url",
        "Acme-Dup",
        "--json",
    ]);
    assert!(!out.status.success(), "a url taken in another case");
}
