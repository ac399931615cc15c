//! What a new integrator runs into: exact matching of identifiers,
//! trailing slashes, form bodies, missing envelopes, spec sort names.

use crate::engine_tests;
use crate::support::TestApp;
use serde_json::json;

engine_tests!(
    identifier_filters_match_whole_values,
    trailing_slashes_and_content_types,
    spec_sort_names_and_lone_ts_bounds,
    blank_and_malformed_values,
    location_keys_need_update_permission,
    ts_keywords_use_the_location_time_zone,
);

fn identifier_filters_match_whole_values(app: &TestApp) {
    let t = app.bootstrap();
    t.contact(json!({ "contact_api_id": "crm-1" }));
    t.contact(json!({ "contact_api_id": "crm-10" }));
    let r = t.get("/v2/contacts?contact_api_id=crm-1").expect(200);
    assert_eq!(r.body["meta"]["pagination"]["totalCount"], 1);
    let r = t.get("/v2/contacts?contact_api_id=crm-1,crm-10").expect(200);
    assert_eq!(r.body["meta"]["pagination"]["totalCount"], 2);

    t.user(&t.location_id(), Some("132"));
    t.user(&t.location_id(), Some("2"));
    let admins = t.get("/v2/authroleusers?auth_role_id=1").expect(200);
    let roles: Vec<&str> = admins.body["authroleusers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["auth_role_id"].as_str().unwrap())
        .collect();
    assert_eq!(roles, vec!["1"], "role 1 does not match 132");
    let some = t.get("/v2/authroleusers?auth_role_id=1,2").expect(200);
    assert_eq!(some.body["meta"]["pagination"]["totalCount"], 2);
}

fn trailing_slashes_and_content_types(app: &TestApp) {
    let t = app.bootstrap();
    let c = t.contact(json!({}));
    let id = c["id"].as_str().unwrap();
    t.get("/v2/contacts/").expect(200);
    t.get(&format!("/v2/contacts/{id}/")).expect(200);
    t.get("/v2/contacts/?page_size=1").expect(200);
    let body = json!({ "contact": { "location_id": t.location_id(), "last_name": "Slash" } }).to_string();
    assert_eq!(t.send("POST", "/v2/contacts/", Some(&body)).status, 201);

    let creds = [
        ("developer-id", t.cred("developer_id")),
        ("user-id", t.cred("user_id")),
        ("user-api-key", t.cred("user_api_key")),
    ];
    let mut headers: Vec<(&str, &str)> = creds.iter().map(|(k, v)| (*k, v.as_str())).collect();
    headers.push(("content-type", "application/x-www-form-urlencoded"));
    let form = app
        .client()
        .send("POST", "/v2/contacts", &headers, Some("contact[last_name]=Form"));
    assert_eq!(form.status, 415, "{}", form.text);
    assert!(form.body["message"]
        .as_str()
        .unwrap()
        .contains("application/json"));
    assert_eq!(
        t.get("/v2/contacts?last_name=Form").body["meta"]["pagination"]["totalCount"],
        0
    );

    let bare = t
        .post(
            "/v2/contacts",
            json!({ "location_id": t.location_id(), "last_name": "Bare" }),
        )
        .expect(422);
    assert!(
        bare.errors("contact")[0].contains("{\"contact\": {...}}"),
        "{}",
        bare.text
    );
}

fn spec_sort_names_and_lone_ts_bounds(app: &TestApp) {
    let t = app.bootstrap();
    let c = t.contact(json!({}));
    let r = t.get("/v2/contacts?sort=-created").expect(200);
    assert_eq!(r.body["meta"]["sort"]["attributes"]["created_ts"], "desc");
    let ts = c["created_ts"].as_i64().unwrap();
    let count = |q: &str| {
        t.get(&format!("/v2/contacts?{q}")).expect(200).body["meta"]["pagination"]["totalCount"].clone()
    };
    assert_eq!(count(&format!("created_ts_from={}", ts + 1)), 0);
    assert_eq!(count(&format!("created_ts_from={ts}")), 1);
    assert_eq!(count(&format!("created_ts_to={}", ts - 1)), 0);
    let bad = t.get("/v2/contacts?created_ts=tomorrow").expect(422);
    assert!(bad.errors("created_ts")[0].contains("last 30 days"));
    t.get("/v2/contacts?date_of_birth=notadate").expect(422);
    t.get("/v2/contacts?date_of_birth=1980-01-01|1990-12-31")
        .expect(200);
}

fn blank_and_malformed_values(app: &TestApp) {
    let t = app.bootstrap();
    let r = t
        .post(
            "/v2/contacts",
            json!({ "contact": { "location_id": t.location_id(), "last_name": "   " } }),
        )
        .expect(422);
    assert_eq!(r.errors("last_name"), vec!["Last Name cannot be blank."]);
    // Keys may carry dashes and underscores.
    let body = json!({ "user": { "primary_location_id": t.location_id(), "username": "pos-terminal-1",
        "user_api_key": "pos2-secret_key-0123456789abcdef" } });
    t.post("/v2/users", body).expect(201);
    let child = t.location(&t.location_id(), "Branch");
    t.contact(json!({ "location_id": child }));
    let r = t.delete(&format!("/v2/locations/{child}")).expect(409);
    assert!(r.errors("id")[0].contains("1 contact."), "{}", r.text);
}

fn location_keys_need_update_permission(app: &TestApp) {
    let t = app.bootstrap();
    let loc = t.location_id();
    let admin_view = t.get(&format!("/v2/locations/{loc}")).expect(200);
    assert_eq!(
        admin_view.body["location"]["location_api_key"]
            .as_str()
            .unwrap()
            .len(),
        36
    );
    let (uid, key) = t.user(&loc, Some("2"));
    let reader = t.as_user(&uid, &key);
    let view = reader.get(&format!("/v2/locations/{loc}")).expect(200);
    assert!(view.body["location"]["location_api_key"].is_null());
    assert!(view.body["location"]["ticket_hash_key"].is_null());
    assert_eq!(view.body["location"]["name"], admin_view.body["location"]["name"]);
}

/// `_ts` keywords follow the location's time zone. A record is dated
/// 01:00 today in Kiritimati (UTC+14); another zone is picked where that
/// instant falls on a different "today", and the server must agree with
/// the calendar in both.
fn ts_keywords_use_the_location_time_zone(app: &TestApp) {
    use chrono::TimeZone;
    let t = app.bootstrap();
    let c = t.contact(json!({ "last_name": "Zoned" }));
    let id = c["id"].as_str().unwrap().to_string();
    let kiritimati: chrono_tz::Tz = "Pacific/Kiritimati".parse().unwrap();
    let now = chrono::Utc::now();
    let today_there = now.with_timezone(&kiritimati).date_naive();
    let midnight = kiritimati
        .from_local_datetime(&today_there.and_hms_opt(0, 0, 0).unwrap())
        .single()
        .unwrap();
    // A minute either side of Kiritimati's midnight (UTC+14, the first
    // zone into a day): before it when UTC already has Kiritimati's
    // yesterday as its today, after it when UTC is a day further on. Either
    // way the two zones give the moment different days, and it is past.
    let utc_today = now.date_naive();
    let ts = if utc_today < today_there {
        midnight - chrono::Duration::minutes(1)
    } else {
        midnight + chrono::Duration::minutes(1)
    };
    crate::support::db::db(app).exec(
        "UPDATE contacts SET created_ts = CAST(CAST(? AS TEXT) AS BIGINT) WHERE id = ?",
        &[&ts.timestamp().to_string(), &id],
    );
    // What the calendar says: is `ts` today, or yesterday, in `zone`?
    let expect = |zone: chrono_tz::Tz| {
        let day = ts.with_timezone(&zone).date_naive();
        let today = now.with_timezone(&zone).date_naive();
        (day == today, day == today.pred_opt().unwrap())
    };
    let other = [
        "UTC",
        "Etc/GMT+12",
        "America/New_York",
        "Asia/Kolkata",
        "Etc/GMT-12",
    ]
    .iter()
    .map(|z| z.parse::<chrono_tz::Tz>().unwrap())
    .find(|z| expect(*z) != expect(kiritimati))
    .expect("some zone sees another day");
    let count = |q: &str| {
        t.get(&format!("/v2/contacts?last_name=Zoned&{q}"))
            .expect(200)
            .body["meta"]["pagination"]["totalCount"]
            .as_u64()
            .unwrap()
    };
    let loc = t.location_id();
    for zone in [kiritimati, other] {
        let l = t.get(&format!("/v2/locations/{loc}")).expect(200);
        let body = json!({ "location": { "parent_id": l.body["location"]["parent_id"],
            "name": l.body["location"]["name"], "tz": zone.name() } });
        t.put(&format!("/v2/locations/{loc}"), body).expect(200);
        let (today, yesterday) = expect(zone);
        assert_eq!(
            count("created_ts=today"),
            today as u64,
            "today in {}",
            zone.name()
        );
        assert_eq!(
            count("created_ts=yesterday"),
            yesterday as u64,
            "yesterday in {}",
            zone.name()
        );
    }
}
