//! Contacts end to end: create, read, update, delete, api id addressing,
//! update_if_exists, expands and change logs.

use crate::engine_tests;
use crate::support::TestApp;
use serde_json::json;

engine_tests!(
    contact_lifecycle,
    contact_api_id_is_unique_per_location,
    update_if_exists_updates_instead,
    receipts_follow_the_location_default,
    record_columns_filter_lists,
    api_id_addressing,
    contact_expands_and_changelogs,
    substring_filters_follow_every_change,
    unfiltered_totals_follow_every_write,
);

fn contact_lifecycle(app: &TestApp) {
    let t = app.bootstrap();
    let created = t
        .post(
            "/v2/contacts",
            json!({ "contact": {
                "location_id": t.location_id(), "last_name": "Łukasiewicz", "first_name": "Jan",
                "email": "jan@example.com", "email_trx_receipt": 1, "zip": "12345-6789", "state": "TX",
                "home_phone": "5125550100", "date_of_birth": "1980-02-29", "header_message_type": 2,
                "contact_c1": "custom ☃"
            }}),
        )
        .expect(201);
    let c = &created.body["contact"];
    let id = c["id"].as_str().unwrap();
    assert!((24..=36).contains(&id.len()));
    assert_eq!(c["last_name"], "Łukasiewicz");
    assert_eq!(c["email_trx_receipt"], true, "1 in, boolean out");
    assert_eq!(
        c["company_name"],
        serde_json::Value::Null,
        "absent values are null"
    );
    assert_eq!(c["contact_c1"], "custom ☃");
    let ts = c["created_ts"].as_i64().unwrap();
    assert_eq!(ts.to_string().len(), 10);
    assert_eq!(
        c["_links"]["self"]["href"],
        format!("{}/v2/contacts/{id}", app.base)
    );
    assert!(
        c.get("update_if_exists").is_none(),
        "transient input is not a field"
    );

    let read = t.get(&format!("/v2/contacts/{id}")).expect(200);
    assert_eq!(read.body["contact"], *c);

    let updated = t
        .put(
            &format!("/v2/contacts/{id}"),
            json!({ "contact": { "first_name": "Janek", "email_trx_receipt": false } }),
        )
        .expect(200);
    assert_eq!(updated.body["contact"]["first_name"], "Janek");
    assert_eq!(updated.body["contact"]["email_trx_receipt"], false);
    assert_eq!(updated.body["contact"]["last_name"], "Łukasiewicz");

    let del = t.delete(&format!("/v2/contacts/{id}")).expect(204);
    assert!(del.text.is_empty(), "204 has no body");
    t.get(&format!("/v2/contacts/{id}")).expect(404);
    t.delete(&format!("/v2/contacts/{id}")).expect(404);
    t.put(
        &format!("/v2/contacts/{id}"),
        json!({ "contact": { "first_name": "x" } }),
    )
    .expect(404);
}

fn contact_api_id_is_unique_per_location(app: &TestApp) {
    let t = app.bootstrap();
    let first = t.contact(json!({ "contact_api_id": "CRM-1" }));
    let dup = t
        .post("/v2/contacts", json!({ "contact": { "location_id": t.location_id(), "last_name": "X", "contact_api_id": "CRM-1" } }))
        .expect(422);
    assert!(dup.errors("contact_api_id")[0].contains(first["id"].as_str().unwrap()));
    // Another location may use the same api id.
    let child = t.location(&t.location_id(), "Branch");
    t.post(
        "/v2/contacts",
        json!({ "contact": { "location_id": child, "last_name": "X", "contact_api_id": "CRM-1" } }),
    )
    .expect(201);
    // Renaming onto a taken api id is refused too.
    let other = t.contact(json!({ "contact_api_id": "CRM-2" }));
    let r = t
        .put(
            &format!("/v2/contacts/{}", other["id"].as_str().unwrap()),
            json!({ "contact": { "contact_api_id": "CRM-1" } }),
        )
        .expect(422);
    assert!(!r.errors("contact_api_id").is_empty());
    let list = t.get("/v2/contacts?contact_api_id=CRM-1").expect(200);
    assert_eq!(list.body["meta"]["pagination"]["totalCount"], 2);
}

fn update_if_exists_updates_instead(app: &TestApp) {
    let t = app.bootstrap();
    let loc = t.location_id();
    let r = t
        .post(
            "/v2/contacts",
            json!({ "contact": { "location_id": loc, "last_name": "A", "update_if_exists": 1 } }),
        )
        .expect(422);
    assert!(
        !r.errors("contact_api_id").is_empty(),
        "contact_api_id is required with update_if_exists"
    );
    let first = t
        .post("/v2/contacts", json!({ "contact": { "location_id": loc, "last_name": "A", "contact_api_id": "u1", "update_if_exists": 1 } }))
        .expect(201);
    let again = t
        .post("/v2/contacts", json!({ "contact": { "location_id": loc, "last_name": "B", "city": "Austin", "contact_api_id": "u1", "update_if_exists": "1" } }))
        .expect(200);
    assert_eq!(again.body["contact"]["id"], first.body["contact"]["id"]);
    assert_eq!(again.body["contact"]["last_name"], "B");
    assert_eq!(again.body["contact"]["city"], "Austin");
    assert_eq!(t.get("/v2/contacts").body["meta"]["pagination"]["totalCount"], 1);
    // An update needs only what changes: not the fields a new contact needs.
    let partial = t
        .post("/v2/contacts", json!({ "contact": { "location_id": loc, "city": "Reno", "contact_api_id": "u1", "update_if_exists": 1 } }))
        .expect(200);
    assert_eq!(partial.body["contact"]["city"], "Reno");
    assert_eq!(partial.body["contact"]["last_name"], "B");
    // A new contact still does, and nothing is written.
    let r = t
        .post("/v2/contacts", json!({ "contact": { "location_id": loc, "city": "Reno", "contact_api_id": "u2", "update_if_exists": 1 } }))
        .expect(422);
    assert!(!r.errors("last_name").is_empty(), "{}", r.text);
    assert_eq!(t.get("/v2/contacts").body["meta"]["pagination"]["totalCount"], 1);
    // An upsert that would update needs the update permission too: a
    // role that may create contacts but not change them (an operator's
    // own role) creates, and is refused the update.
    let mut db = crate::support::db::db(app);
    let role = format!("9{}", uuid::Uuid::new_v4().as_u128() % 1_000_000_000);
    db.exec(
        "INSERT INTO roles (id, title, is_admin) VALUES (?, 'Create only', 0)",
        &[&role],
    );
    for permission in ["contacts.create", "contacts.read"] {
        db.exec(
            "INSERT INTO role_permissions (role_id, permission) VALUES (?, ?)",
            &[&role, permission],
        );
    }
    let (id, key) = t.user(&loc, Some(&role));
    let creator = t.as_user(&id, &key);
    creator
        .post("/v2/contacts", json!({ "contact": { "location_id": loc, "last_name": "C", "contact_api_id": "u3", "update_if_exists": 1 } }))
        .expect(201);
    creator
        .post("/v2/contacts", json!({ "contact": { "location_id": loc, "city": "Elko", "contact_api_id": "u1", "update_if_exists": 1 } }))
        .expect(403);
    assert_eq!(
        t.get(&format!(
            "/v2/contacts/{}",
            partial.body["contact"]["id"].as_str().unwrap()
        ))
        .body["contact"]["city"],
        "Reno"
    );
}

/// `email_trx_receipt` is always a boolean: unsent, the location's
/// `contact_email_trx_receipt_default` decides.
fn receipts_follow_the_location_default(app: &TestApp) {
    let t = app.bootstrap();
    let loc = t.location_id();
    let off = t.contact(json!({}));
    assert_eq!(off["email_trx_receipt"], false, "{off}");
    t.put(
        &format!("/v2/locations/{loc}"),
        json!({ "location": { "contact_email_trx_receipt_default": 1 } }),
    )
    .expect(200);
    let on = t.contact(json!({}));
    assert_eq!(on["email_trx_receipt"], true, "{on}");
    let declined = t.contact(json!({ "email_trx_receipt": 0 }));
    assert_eq!(declined["email_trx_receipt"], false, "{declined}");
    let listed = t.get("/v2/contacts?email_trx_receipt=1").expect(200);
    assert_eq!(
        listed.body["meta"]["pagination"]["totalCount"], 1,
        "{}",
        listed.text
    );

    // Contacts stored before this rule (null) take their location's
    // default when migration 28 runs.
    let mut db = crate::support::db::db(app);
    for c in [&off, &on] {
        db.exec(
            "UPDATE contacts SET email_trx_receipt = NULL WHERE id = ?",
            &[c["id"].as_str().unwrap()],
        );
    }
    db.exec("DELETE FROM schema_migrations WHERE version = 28", &[]);
    let out = app.cli(&["migrate"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for c in [&off, &on] {
        let id = c["id"].as_str().unwrap();
        let back = t.get(&format!("/v2/contacts/{id}")).expect(200);
        assert_eq!(
            back.body["contact"]["email_trx_receipt"], true,
            "the location's default now"
        );
    }
}

fn api_id_addressing(app: &TestApp) {
    let t = app.bootstrap();
    let loc = t.location_id();
    let c = t.contact(json!({ "contact_api_id": "ext42" }));
    let by_api = t
        .get(&format!("/v2/contacts/ext42?api_id=1&location_id={loc}"))
        .expect(200);
    assert_eq!(by_api.body["contact"]["id"], c["id"]);
    // Without location_id the caller's own location is meant.
    t.get("/v2/contacts/ext42?api_id=1").expect(200);
    t.get("/v2/contacts/ext43?api_id=1").expect(404);
    t.get("/v2/contacts/ext42").expect(404);
    t.put(
        &format!("/v2/contacts/ext42?api_id=1&location_id={loc}"),
        json!({ "contact": { "city": "Reno" } }),
    )
    .expect(200);
    assert_eq!(
        t.get(&format!("/v2/contacts/{}", c["id"].as_str().unwrap())).body["contact"]["city"],
        "Reno"
    );
    t.delete(&format!("/v2/contacts/ext42?api_id=1&location_id={loc}"))
        .expect(204);
    t.get(&format!("/v2/contacts/{}", c["id"].as_str().unwrap()))
        .expect(404);
}

fn contact_expands_and_changelogs(app: &TestApp) {
    let t = app.bootstrap();
    let c = t.contact(json!({ "first_name": "Ann" }));
    let id = c["id"].as_str().unwrap();
    t.post(
        "/v2/notes",
        json!({ "note": { "resource": "Contact", "resource_id": id, "note": "VIP" } }),
    )
    .expect(201);
    t.put(
        &format!("/v2/contacts/{id}"),
        json!({ "contact": { "first_name": "Anne", "city": "Oslo" } }),
    )
    .expect(200);
    let r = t
        .get(&format!(
            "/v2/contacts/{id}?expand=created_user,notes,location,user,changelogs"
        ))
        .expect(200);
    let c = &r.body["contact"];
    assert_eq!(c["created_user"]["id"], t.user_id());
    assert_eq!(c["location"]["id"], t.location_id());
    assert_eq!(c["notes"][0]["note"], "VIP");
    assert_eq!(c["user"], serde_json::Value::Null);
    let logs = c["changelogs"].as_array().unwrap();
    assert_eq!(logs.len(), 2);
    // Newest first, as the reference's postbacks show them.
    assert_eq!(logs[0]["action"], "UPDATE");
    assert_eq!(logs[1]["action"], "CREATE");
    assert_eq!(logs[0]["model"], "Contact");
    assert_eq!(logs[0]["user_id"], t.user_id());
    let mut details: Vec<(String, serde_json::Value)> = logs[0]["changelog_details"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["field"].as_str().unwrap().to_string(), d["old_value"].clone()))
        .collect();
    details.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        details,
        vec![
            ("city".to_string(), serde_json::Value::Null),
            ("first_name".to_string(), json!("Ann"))
        ]
    );
    // An update that changes nothing records nothing.
    t.put(
        &format!("/v2/contacts/{id}"),
        json!({ "contact": { "city": "Oslo" } }),
    )
    .expect(200);
    let r = t.get(&format!("/v2/contacts/{id}?expand=changelogs")).expect(200);
    assert_eq!(r.body["contact"]["changelogs"].as_array().unwrap().len(), 2);
    let bad = t.get(&format!("/v2/contacts/{id}?expand=tags")).expect(422);
    assert!(
        bad.errors("expand")[0].contains("created_user"),
        "lists the allowed expands"
    );
}

/// Substring filters on the searched columns (first and last name, email,
/// company) go through the trigram index on SQLite and PostgreSQL: they
/// must find exactly what a scan would, after creates, changes and
/// deletes, in any case, in the caller's scope only, and needles the
/// index cannot take (short, wildcards, non-ASCII) still work.
fn substring_filters_follow_every_change(app: &TestApp) {
    let t = app.bootstrap();
    let other = app.bootstrap();
    let make = |t: &crate::support::Tenant, last: &str, first: &str, email: &str, company: &str| {
        t.post(
            "/v2/contacts",
            json!({ "contact": { "location_id": t.location_id(), "last_name": last, "first_name": first,
                "email": email, "company_name": company } }),
        )
        .expect(201)
        .body["contact"]["id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let ada = make(
        &t,
        "Lovelace",
        "Ada",
        "ada@analytical.example",
        "Analytical Engines",
    );
    let alan = make(&t, "Turing", "Alan", "alan@bletchley.example", "Bletchley Park");
    let grace = make(&t, "Hopper", "Grace", "grace@navy.example", "Navy 50% Labs");
    let zoe = make(&t, "Zoë", "Ölschläger", "zoe@example.com", "Über_Corp");
    // Another tenant's contact with the same name is never found.
    make(
        &other,
        "Lovelace",
        "Ada",
        "ada@other.example",
        "Analytical Engines",
    );
    let found = |query: &str| -> Vec<String> {
        let r = t.get(&format!("/v2/contacts?{query}")).expect(200);
        let mut ids: Vec<String> = r.body["contacts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["id"].as_str().unwrap().to_string())
            .collect();
        ids.sort();
        assert_eq!(
            r.body["meta"]["pagination"]["totalCount"],
            ids.len(),
            "{query}: {}",
            r.text
        );
        ids
    };
    let sorted = |mut v: Vec<&String>| {
        v.sort();
        v.into_iter().cloned().collect::<Vec<_>>()
    };
    assert_eq!(found("last_name=ovela"), vec![ada.clone()]);
    assert_eq!(found("last_name=OVELA"), vec![ada.clone()]);
    assert_eq!(found("first_name=ala"), vec![alan.clone()]);
    assert_eq!(found("email=.example"), sorted(vec![&ada, &alan, &grace]));
    assert_eq!(found("company_name=park"), vec![alan.clone()]);
    assert_eq!(found("last_name=nobody"), Vec::<String>::new());
    // Needles the index cannot take: short, wildcards, non-ASCII.
    assert_eq!(found("last_name=ur"), vec![alan.clone()]);
    assert_eq!(found("company_name=50%25"), vec![grace.clone()]);
    assert_eq!(found("company_name=r_c"), vec![zoe.clone()]);
    assert_eq!(found("first_name=%C3%B6lsch"), vec![zoe.clone()]);
    // Changes and deletes are followed at once.
    t.put(
        &format!("/v2/contacts/{alan}"),
        json!({ "contact": { "last_name": "Turingmachine" } }),
    )
    .expect(200);
    assert_eq!(found("last_name=machine"), vec![alan.clone()]);
    t.put(
        &format!("/v2/contacts/{ada}"),
        json!({ "contact": { "last_name": "Byron" } }),
    )
    .expect(200);
    assert_eq!(found("last_name=ovela"), Vec::<String>::new());
    assert_eq!(found("last_name=byr"), vec![ada.clone()]);
    t.delete(&format!("/v2/contacts/{grace}")).expect(204);
    assert_eq!(found("email=navy"), Vec::<String>::new());
    // A filter combined with others, sorted and paged.
    let more: Vec<String> = (0..25)
        .map(|i| {
            make(
                &t,
                &format!("Searchable{i:02}"),
                "Page",
                &format!("p{i}@page.example"),
                "Pages",
            )
        })
        .collect();
    let r = t
        .get("/v2/contacts?last_name=archable&page_size=10&page=3&sort=last_name")
        .expect(200);
    assert_eq!(r.body["meta"]["pagination"]["totalCount"], 25);
    let page: Vec<&str> = r.body["contacts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(page, more[20..].iter().map(String::as_str).collect::<Vec<_>>());
}

/// An unfiltered list's total is kept as rows come and go (not counted
/// row by row): it must stay exact through creates, deletes, a refused
/// write, a subtree scope and a row moved behind the API's back, and a
/// filter still narrows the total.
fn unfiltered_totals_follow_every_write(app: &TestApp) {
    let t = app.bootstrap();
    let other = app.bootstrap();
    let p = t.location_id();
    let c1 = t.location(&p, "C1");
    let g = t.location(&c1, "G");
    let c2 = t.location(&p, "C2");
    let mut ids = Vec::new();
    for (loc, n) in [(&p, 2), (&c1, 3), (&g, 2), (&c2, 1)] {
        for i in 0..n {
            let c = t.contact(json!({ "location_id": loc, "last_name": format!("N{i}"),
                "contact_api_id": format!("{loc}-{i}") }));
            ids.push((loc.clone(), c["id"].as_str().unwrap().to_string()));
        }
    }
    other.contact(json!({ "location_id": other.location_id(), "last_name": "Else" }));
    let (u1, k1) = t.user(&c1, Some("132"));
    let (ug, kg) = t.user(&g, Some("132"));
    let c1_user = t.as_user(&u1, &k1);
    let g_user = t.as_user(&ug, &kg);
    // page_size=1: a first page shorter than the page needs no count, so
    // every total below is the kept one.
    let total = |who: &crate::support::Tenant, query: &str| {
        who.get(&format!("/v2/contacts?page_size=1{query}"))
            .expect(200)
            .body["meta"]["pagination"]["totalCount"]
            .as_u64()
            .unwrap()
    };
    // `first`: contacts named N0 (the first made at each location).
    let check = |all: u64, under_c1: u64, at_g: u64, first: u64| {
        assert_eq!(total(&t, ""), all, "the whole tenant");
        assert_eq!(total(&c1_user, ""), under_c1, "C1's subtree");
        assert_eq!(total(&g_user, ""), at_g, "G, a leaf");
        // The same lists filtered are counted row by row: they agree, and
        // a filter that leaves some out is not answered from the kept count.
        assert_eq!(total(&t, "&last_name=N"), all);
        assert_eq!(total(&c1_user, "&last_name=N"), under_c1);
        assert_eq!(total(&t, "&last_name=N0"), first);
    };
    check(8, 5, 2, 4);

    // A delete counts down, in the location the row was in.
    let (_, gone) = ids.iter().find(|(loc, _)| *loc == g).unwrap();
    t.delete(&format!("/v2/contacts/{gone}")).expect(204);
    check(7, 4, 1, 3);
    // A refused write (a taken contact_api_id) counts nothing.
    let taken = t.post(
        "/v2/contacts",
        json!({ "contact": { "location_id": c1, "last_name": "Dup", "contact_api_id": format!("{c1}-0") } }),
    );
    assert!(taken.status >= 400 && taken.status < 500, "{}", taken.text);
    check(7, 4, 1, 3);
    // A row moved to another location, by hand, moves its count.
    let mut db = crate::support::db::db(app);
    let (_, moved) = ids.iter().find(|(loc, _)| *loc == c1).unwrap();
    db.exec("UPDATE contacts SET location_id = ? WHERE id = ?", &[&c2, moved]);
    check(7, 3, 1, 3);
    db.assert_counts_kept();
    // The unfiltered total is the kept count itself: a count that were
    // wrong would show (and a filtered total would not).
    db.exec(
        "INSERT INTO row_counts (table_name, location_id, stripe, n) VALUES ('contacts', ?, 99, 100)",
        &[&g],
    );
    assert_eq!(total(&g_user, ""), 101);
    assert_eq!(total(&g_user, "&last_name=N"), 1);
    db.exec("DELETE FROM row_counts WHERE stripe = 99", &[]);
    assert_eq!(total(&other, ""), 1, "another tenant's rows are its own");
}

/// Lists narrow by record columns (the spec's `?field=value`), the
/// plainer columns included; a number or secret column does not.
fn record_columns_filter_lists(app: &TestApp) {
    let t = app.bootstrap();
    let a = t.contact(json!({ "office_ext_phone": "123", "header_message": "Call first" }));
    let _b = t.contact(json!({ "office_ext_phone": "987" }));
    for query in ["office_ext_phone=123", "header_message=call"] {
        let r = t.get(&format!("/v2/contacts?{query}")).expect(200);
        assert_eq!(r.ids("contacts"), [a["id"].as_str().unwrap()], "{query}");
    }
    let loc = t.location_id();
    t.put(
        &format!("/v2/locations/{loc}"),
        json!({ "location": { "tz": "America/Chicago", "fax": "5125550199" } }),
    )
    .expect(200);
    for query in ["tz=chicago", "fax=5125550199"] {
        let r = t.get(&format!("/v2/locations?{query}")).expect(200);
        assert!(r.ids("locations").contains(&loc), "{query}: {}", r.text);
    }
    t.get("/v2/locations?tz=Europe").expect(200);
    t.get("/v2/locations?dda=1").expect(422);
}
