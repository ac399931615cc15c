//! Users end to end: create rules (system-wide unique usernames, e-mail
//! and key formats), write-only keys that are never stored in clear,
//! read/list/update/delete, `me`, API key generation and the rule that a
//! user has no permission until a role is attached.

use crate::engine_tests;
use crate::support::db::db;
use crate::support::{error_fields, fields, str_of, Resp, Tenant, TestApp};
use serde_json::{json, Value};
use std::collections::BTreeSet;

engine_tests!(
    user_create_validation,
    username_is_unique_system_wide,
    user_keys_are_write_only_and_sealed,
    user_read_list_update_delete,
    user_cannot_delete_itself,
    users_me,
    generate_user_api_key,
    key_renewal_cannot_take_over_a_stronger_user,
    new_user_has_no_permission_until_a_role_is_attached,
    users_are_scoped,
    user_record_as_the_reference_has_it,
    usernames_are_names_people_can_tell_apart,
    a_user_goes_with_what_it_alone_held,
    a_reference_the_rules_miss_is_named,
    password_refusals_say_what_is_wrong,
    any_role_reads_its_own_record_by_id,
);

fn unique_name(prefix: &str) -> String {
    format!("{prefix}{}", uuid::Uuid::new_v4().simple())
}

fn user_body(location: &str, extra: Value) -> Value {
    let mut b = json!({
        "primary_location_id": location,
        "username": unique_name("user"),
        "email": "someone@example.com",
    });
    for (k, v) in extra.as_object().unwrap() {
        b[k.as_str()] = v.clone();
    }
    b
}

fn create(t: &Tenant, body: Value) -> Resp {
    t.post("/v2/users", json!({ "user": body }))
}

fn user_create_validation(app: &TestApp) {
    let t = app.bootstrap();
    let other = app.bootstrap();
    let loc = t.location_id();
    let r = create(&t, json!({})).expect(422);
    let named = error_fields(&r);
    assert!(named.contains("primary_location_id"), "{}", r.text);
    assert!(named.contains("username"), "{}", r.text);
    for missing in ["primary_location_id", "username"] {
        let mut b = user_body(&loc, json!({}));
        b.as_object_mut().unwrap().remove(missing);
        let r = create(&t, b).expect(422);
        assert_eq!(error_fields(&r), fields(&[missing]), "{}", r.text);
    }
    for bad in [
        "not-an-email",
        "a@b",
        "@example.com",
        "two@@example.com",
        "spa ce@example.com",
        "a@c..com",
        ".a@example.com",
        "a@exa!mple.com",
    ] {
        let r = create(&t, user_body(&loc, json!({ "email": bad }))).expect(422);
        assert_eq!(error_fields(&r), fields(&["email"]), "email {bad}: {}", r.text);
    }
    let long_email = format!("{}@example.com", "e".repeat(117));
    let r = create(&t, user_body(&loc, json!({ "email": long_email }))).expect(422);
    assert_eq!(error_fields(&r), fields(&["email"]), "{}", r.text);
    let r = create(&t, user_body(&loc, json!({ "username": "u".repeat(65) }))).expect(422);
    assert_eq!(error_fields(&r), fields(&["username"]), "{}", r.text);
    for bad in [
        "nope".to_string(),
        uuid::Uuid::new_v4().simple().to_string(),
        other.location_id(),
    ] {
        let r = create(&t, user_body(&loc, json!({ "primary_location_id": bad }))).expect(422);
        assert_eq!(error_fields(&r), fields(&["primary_location_id"]), "{}", r.text);
    }
    for key in ["user_api_key", "user_hash_key"] {
        for bad in [
            "A".repeat(23),
            "A".repeat(65),
            format!("{}!", "A".repeat(30)),
            format!("{} ", "A".repeat(30)),
            format!("{}é", "A".repeat(30)),
        ] {
            let r = create(&t, user_body(&loc, json!({ key: bad }))).expect(422);
            assert_eq!(error_fields(&r), fields(&[key]), "{key}={bad:?}: {}", r.text);
        }
        for good in ["A".repeat(24), "z9".repeat(32)] {
            let r = create(&t, user_body(&loc, json!({ key: good }))).expect(201);
            assert_eq!(r.body["user"][key], Value::Null, "{key} reads back null");
        }
    }
    for system in [
        "id",
        "created_ts",
        "api_key_hash",
        "hash_key_enc",
        "password_hash",
    ] {
        let r = create(&t, user_body(&loc, json!({ system: "0123456789abcdef01234567" }))).expect(422);
        assert!(!r.errors(system).is_empty(), "{system}: {}", r.text);
    }
    // A good one, with every ordinary field.
    let name = unique_name("Ann.");
    let r = create(
        &t,
        user_body(
            &loc,
            json!({ "username": name, "first_name": "Ann", "last_name": "Lee", "email": "ann@example.com",
                    "tz": "Europe/Oslo", "locale": "en-US", "user_type_id": 300 }),
        ),
    )
    .expect(201);
    let u = &r.body["user"];
    let id = str_of(&u["id"]);
    assert!((24..=36).contains(&id.len()));
    assert_eq!(u["username"], name);
    assert_eq!(u["primary_location_id"], loc);
    assert_eq!(u["first_name"], "Ann");
    assert_eq!(u["email"], "ann@example.com");
    assert_eq!(u["tz"], "Europe/Oslo");
    assert_eq!(u["locale"], "en-US");
    assert_eq!(u["user_type_id"], 300);
    assert_eq!(u["status"], 1, "new users are active");
    assert_eq!(u["created_ts"].as_i64().unwrap().to_string().len(), 10);
    assert_eq!(u["_links"]["self"]["href"], format!("{}/v2/users/{id}", app.base));
}

fn username_is_unique_system_wide(app: &TestApp) {
    let a = app.bootstrap();
    let b = app.bootstrap();
    let name = unique_name("alice");
    create(&a, user_body(&a.location_id(), json!({ "username": name }))).expect(201);
    // The same tenant, a child location, another tenant: all refused.
    let child = a.location(&a.location_id(), "Branch");
    for (who, loc) in [(&a, a.location_id()), (&a, child.clone()), (&b, b.location_id())] {
        let r = create(who, user_body(&loc, json!({ "username": name }))).expect(422);
        assert_eq!(error_fields(&r), fields(&["username"]), "{}", r.text);
    }
    // The bootstrap admin's name is taken too.
    let admin_name = str_of(&a.get("/v2/users/me").expect(200).body["user"]["username"]);
    let r = create(&b, user_body(&b.location_id(), json!({ "username": admin_name }))).expect(422);
    assert_eq!(error_fields(&r), fields(&["username"]), "{}", r.text);
    // Renaming onto a taken name is refused; keeping one's own name is not.
    let (bob, _) = b.user(&b.location_id(), None);
    let r = b
        .put(
            &format!("/v2/users/{bob}"),
            json!({ "user": { "username": name } }),
        )
        .expect(422);
    assert_eq!(error_fields(&r), fields(&["username"]), "{}", r.text);
    let bob_name = str_of(&b.get(&format!("/v2/users/{bob}")).expect(200).body["user"]["username"]);
    b.put(
        &format!("/v2/users/{bob}"),
        json!({ "user": { "username": bob_name } }),
    )
    .expect(200);
    let fresh = unique_name("bob");
    let r = b
        .put(
            &format!("/v2/users/{bob}"),
            json!({ "user": { "username": fresh } }),
        )
        .expect(200);
    assert_eq!(r.body["user"]["username"], fresh);
    // The old name is free again.
    create(&a, user_body(&a.location_id(), json!({ "username": bob_name }))).expect(201);
    // A deleted user's name can be reused.
    let gone = unique_name("gone");
    let id = str_of(
        &create(&a, user_body(&a.location_id(), json!({ "username": gone })))
            .expect(201)
            .body["user"]["id"],
    );
    a.delete(&format!("/v2/users/{id}")).expect(204);
    create(&b, user_body(&b.location_id(), json!({ "username": gone }))).expect(201);
}

fn user_keys_are_write_only_and_sealed(app: &TestApp) {
    let t = app.bootstrap();
    let api_key = format!("Api{}", uuid::Uuid::new_v4().simple());
    let hash_key = format!("Hash{}", uuid::Uuid::new_v4().simple());
    let r = create(
        &t,
        user_body(
            &t.location_id(),
            json!({ "user_api_key": api_key, "user_hash_key": hash_key }),
        ),
    )
    .expect(201);
    let id = str_of(&r.body["user"]["id"]);
    let check = |u: &Value, how: &str| {
        assert!(u.get("user_api_key").is_some(), "{how}: user_api_key is a member");
        assert_eq!(
            u["user_api_key"],
            Value::Null,
            "{how}: user_api_key reads back null"
        );
        assert_eq!(
            u["user_hash_key"],
            Value::Null,
            "{how}: user_hash_key reads back null"
        );
        assert!(!u.to_string().contains(&api_key), "{how}");
        assert!(!u.to_string().contains(&hash_key), "{how}");
    };
    check(&r.body["user"], "POST");
    check(&t.get(&format!("/v2/users/{id}")).expect(200).body["user"], "GET");
    let list = t.get("/v2/users").expect(200);
    for u in list.body["users"].as_array().unwrap() {
        check(u, "list");
    }
    let me = t.get("/v2/users/me").expect(200);
    check(&me.body["user"], "me");
    assert!(!me.text.contains(&t.cred("user_api_key")));
    let r = t
        .get(&format!("/v2/users/{id}?expand=changelogs,created_user"))
        .expect(200);
    check(&r.body["user"], "expanded");
    // The key works (once a role is attached).
    t.post(
        "/v2/authroleusers",
        json!({ "authroleuser": { "user_id": id, "auth_role_id": "2" } }),
    )
    .expect(201);
    t.as_user(&id, &api_key).get("/v2/users/me").expect(200);
    // The keys are not writable through PUT, and are not filters.
    let r = t
        .put(
            &format!("/v2/users/{id}"),
            json!({ "user": { "user_api_key": "B".repeat(30) } }),
        )
        .expect(422);
    assert!(!r.errors("user_api_key").is_empty());
    t.as_user(&id, &api_key).get("/v2/users/me").expect(200);
    t.get(&format!("/v2/users?user_api_key={api_key}")).expect(422);
    // Neither key is stored (or logged) in clear.
    let mut conn = db(app);
    for secret in [
        &api_key,
        &hash_key,
        &t.cred("user_api_key"),
        &t.cred("user_hash_key"),
    ] {
        let found = conn.columns_containing(secret);
        assert!(found.is_empty(), "a key is stored in clear in {found:?}");
        assert!(!app.log().contains(secret.as_str()), "a key is in the server log");
    }
    assert!(conn.columns_containing(&id).contains(&"users.id".to_string()));
}

fn user_read_list_update_delete(app: &TestApp) {
    let t = app.bootstrap();
    let loc = t.location_id();
    let name = unique_name("carol");
    let created = create(
        &t,
        user_body(&loc, json!({ "username": name, "first_name": "Carol" })),
    )
    .expect(201);
    let u = created.body["user"].clone();
    let id = str_of(&u["id"]);
    let read = t.get(&format!("/v2/users/{id}")).expect(200);
    assert_eq!(read.body["user"], u);

    let list = t.get("/v2/users").expect(200);
    assert_eq!(
        list.body["meta"]["pagination"]["totalCount"], 2,
        "admin and Carol"
    );
    let r = t.get(&format!("/v2/users?username={name}")).expect(200);
    let found = r.body["users"].as_array().unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0]["id"], id);
    let r = t.get("/v2/users?first_name=caro").expect(200);
    assert_eq!(r.body["users"][0]["id"], id);
    let r = t.get(&format!("/v2/users?primary_location_id={loc}")).expect(200);
    assert_eq!(r.body["meta"]["pagination"]["totalCount"], 2);

    let path = format!("/v2/users/{id}");
    let r = t
        .put(
            &path,
            json!({ "user": { "first_name": "Caroline", "last_name": "King", "email": "ck@example.org", "tz": "America/Denver" } }),
        )
        .expect(200);
    let v = &r.body["user"];
    assert_eq!(v["first_name"], "Caroline");
    assert_eq!(v["last_name"], "King");
    assert_eq!(v["email"], "ck@example.org");
    assert_eq!(v["tz"], "America/Denver");
    assert_eq!(v["username"], name);
    assert_eq!(v["created_ts"], u["created_ts"]);
    assert_eq!(t.get(&path).expect(200).body["user"], *v);
    for (field, bad) in [
        ("email", json!("nope")),
        ("tz", json!("Mars/Olympus")),
        ("username", json!("")),
        ("status", json!(7)),
    ] {
        let r = t.put(&path, json!({ "user": { field: bad } })).expect(422);
        assert_eq!(error_fields(&r), fields(&[field]), "{field}: {}", r.text);
    }
    assert_eq!(
        t.get(&path).expect(200).body["user"],
        *v,
        "refused updates change nothing"
    );

    // A disabled user cannot authenticate; enabling it again restores it.
    let (dis, dis_key) = t.user(&loc, Some("2"));
    let as_dis = t.as_user(&dis, &dis_key);
    as_dis.get("/v2/users/me").expect(200);
    t.put(&format!("/v2/users/{dis}"), json!({ "user": { "status": 0 } }))
        .expect(200);
    assert_eq!(as_dis.get("/v2/users/me").status, 401);
    t.put(&format!("/v2/users/{dis}"), json!({ "user": { "status": 1 } }))
        .expect(200);
    as_dis.get("/v2/users/me").expect(200);
    t.delete(&format!("/v2/users/{dis}")).expect(204);
    // Nobody can disable or delete itself: 409, like the other rules
    // that keep a location administered.
    let me = format!("/v2/users/{}", t.user_id());
    let r = t.put(&me, json!({ "user": { "status": 0 } })).expect(409);
    assert!(r.errors("status")[0].contains("yourself"), "{}", r.text);
    let r = t.delete(&me).expect(409);
    assert!(r.errors("id")[0].contains("yourself"), "{}", r.text);
    t.get("/v2/users/me").expect(200);

    // Delete: 204, then gone; its key stops working; its roles go too.
    let (gone, key) = t.user(&loc, Some("2"));
    let as_gone = t.as_user(&gone, &key);
    as_gone.get("/v2/users/me").expect(200);
    let r = t.delete(&format!("/v2/users/{gone}")).expect(204);
    assert!(r.text.is_empty());
    t.get(&format!("/v2/users/{gone}")).expect(404);
    t.delete(&format!("/v2/users/{gone}")).expect(404);
    t.put(
        &format!("/v2/users/{gone}"),
        json!({ "user": { "first_name": "x" } }),
    )
    .expect(404);
    assert_eq!(as_gone.get("/v2/users/me").status, 401);
    assert_eq!(as_gone.get("/v2/contacts").status, 401);
    let roles = t.get(&format!("/v2/authroleusers?user_id={gone}")).expect(200);
    assert_eq!(roles.body["meta"]["pagination"]["totalCount"], 0);
    t.delete(&path).expect(204);
    assert_eq!(
        t.get("/v2/users").expect(200).body["meta"]["pagination"]["totalCount"],
        1
    );
}

fn user_cannot_delete_itself(app: &TestApp) {
    let t = app.bootstrap();
    let me = t.user_id();
    let r = t.delete(&format!("/v2/users/{me}")).expect(409);
    let errors = r.body["errors"]
        .as_object()
        .unwrap_or_else(|| panic!("409 has a validation body: {}", r.text));
    assert!(!errors.is_empty());
    t.get("/v2/users/me").expect(200);
    t.get(&format!("/v2/users/{me}")).expect(200);
    // An integration user cannot either, but can delete another user.
    let (uid, key) = t.user(&t.location_id(), Some("132"));
    let u = t.as_user(&uid, &key);
    u.delete(&format!("/v2/users/{uid}")).expect(409);
    u.get("/v2/users/me").expect(200);
    let (victim, _) = t.user(&t.location_id(), None);
    u.delete(&format!("/v2/users/{victim}")).expect(204);
}

fn users_me(app: &TestApp) {
    let t = app.bootstrap();
    let other = app.bootstrap();
    let r = t.get("/v2/users/me").expect(200);
    let me = &r.body["user"];
    assert_eq!(me["id"], t.user_id());
    assert_eq!(me["primary_location_id"], t.location_id());
    assert_eq!(
        me["_links"]["self"]["href"],
        format!("{}/v2/users/{}", app.base, t.user_id())
    );
    assert_eq!(t.get(&format!("/v2/users/{}", t.user_id())).body["user"], *me);
    let child = t.location(&t.location_id(), "Branch");
    let (uid, key) = t.user(&child, Some("2"));
    let r = t.as_user(&uid, &key).get("/v2/users/me").expect(200);
    assert_eq!(r.body["user"]["id"], uid);
    assert_eq!(r.body["user"]["primary_location_id"], child);
    assert_eq!(
        other.get("/v2/users/me").expect(200).body["user"]["id"],
        other.user_id()
    );
    assert_eq!(app.client().send("GET", "/v2/users/me", &[], None).status, 401);
}

fn generate_user_api_key(app: &TestApp) {
    let t = app.bootstrap();
    let other = app.bootstrap();
    let (uid, old) = t.user(&t.location_id(), Some("132"));
    t.as_user(&uid, &old).get("/v2/users/me").expect(200);
    let r = t.send("POST", &format!("/v2/users/{uid}/generateuserapikey"), None);
    assert!(r.status == 200 || r.status == 201, "{}: {}", r.status, r.text);
    let user = r.body["user"].as_object().expect("{user:{...}}");
    let new = str_of(&user["user_api_key"]);
    assert!((24..=64).contains(&new.len()), "{new}");
    assert!(new.chars().all(|c| c.is_ascii_alphanumeric()), "{new}");
    assert_ne!(new, old);
    // The new key authenticates, with the tenant's developer-id.
    let me = t.as_user(&uid, &new).get("/v2/users/me").expect(200);
    assert_eq!(me.body["user"]["id"], uid);
    assert_eq!(me.body["user"]["user_api_key"], Value::Null, "shown once only");
    t.as_user(&uid, &new).get("/v2/contacts").expect(200);
    let headers = [
        ("developer-id", t.cred("developer_id")),
        ("user-id", uid.clone()),
        ("user-api-key", new.clone()),
    ];
    let h: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    app.client().send("GET", "/v2/users/me", &h, None).expect(200);
    let bad_dev = [("developer-id", "nosuchdeveloper"), h[1], h[2]];
    assert_eq!(
        app.client().send("GET", "/v2/users/me", &bad_dev, None).status,
        401
    );
    // The old key no longer does.
    assert_eq!(t.as_user(&uid, &old).get("/v2/users/me").status, 401);
    assert_eq!(t.as_user(&uid, &old).get("/v2/contacts").status, 401);
    // Nor is the new one stored in clear.
    assert!(db(app).columns_containing(&new).is_empty());
    // A user may renew its own key.
    let u = t.as_user(&uid, &new);
    let r = u.send("POST", &format!("/v2/users/{uid}/generateuserapikey"), None);
    assert!(r.status == 200 || r.status == 201, "{}", r.text);
    let newer = str_of(&r.body["user"]["user_api_key"]);
    assert_eq!(u.get("/v2/users/me").status, 401);
    t.as_user(&uid, &newer).get("/v2/users/me").expect(200);
    // Another tenant's user, or nobody: not found.
    let r = t.send(
        "POST",
        &format!("/v2/users/{}/generateuserapikey", other.user_id()),
        None,
    );
    assert_eq!(r.status, 404, "{}", r.text);
    other.get("/v2/users/me").expect(200);
    let r = t.send(
        "POST",
        &format!("/v2/users/{}/generateuserapikey", uuid::Uuid::new_v4().simple()),
        None,
    );
    assert_eq!(r.status, 404, "{}", r.text);
    // Without the right, one cannot renew another user's key.
    let (ro, ro_key) = t.user(&t.location_id(), Some("2"));
    let r = t
        .as_user(&ro, &ro_key)
        .send("POST", &format!("/v2/users/{uid}/generateuserapikey"), None);
    assert_eq!(r.status, 403, "{}", r.text);
    t.as_user(&uid, &newer).get("/v2/users/me").expect(200);
}

fn new_user_has_no_permission_until_a_role_is_attached(app: &TestApp) {
    let t = app.bootstrap();
    let (uid, key) = t.user(&t.location_id(), None);
    let u = t.as_user(&uid, &key);
    let contact = json!({ "contact": { "location_id": t.location_id(), "last_name": "X" } });
    for path in [
        "/v2/contacts",
        "/v2/locations",
        "/v2/users",
        "/v2/notes",
        "/v2/locationinfos",
    ] {
        let r = u.get(path);
        assert_eq!(r.status, 403, "GET {path} without a role: {}", r.text);
    }
    assert_eq!(u.post("/v2/contacts", contact.clone()).status, 403);
    assert_eq!(u.get(&format!("/v2/locations/{}", t.location_id())).status, 403);
    // Read only: reads work, writes do not.
    t.post(
        "/v2/authroleusers",
        json!({ "authroleuser": { "user_id": uid, "auth_role_id": "2" } }),
    )
    .expect(201);
    for path in [
        "/v2/contacts",
        "/v2/locations",
        "/v2/users",
        "/v2/notes",
        "/v2/locationinfos",
    ] {
        u.get(path).expect(200);
    }
    assert_eq!(u.post("/v2/contacts", contact.clone()).status, 403);
    // Integration: writes too.
    t.post(
        "/v2/authroleusers",
        json!({ "authroleuser": { "user_id": uid, "auth_role_id": "132" } }),
    )
    .expect(201);
    u.post("/v2/contacts", contact.clone()).expect(201);
    // Taking the roles away takes the permissions away.
    let roles = t.get(&format!("/v2/authroleusers?user_id={uid}")).expect(200);
    for role in roles.body["authroleusers"].as_array().unwrap() {
        t.delete(&format!("/v2/authroleusers/{}", str_of(&role["id"])))
            .expect(204);
    }
    assert_eq!(u.get("/v2/contacts").status, 403);
}

fn users_are_scoped(app: &TestApp) {
    let t = app.bootstrap();
    let other = app.bootstrap();
    let own = t.location_id();
    let a = t.location(&own, "A");
    let b = t.location(&own, "B");
    let (ua_id, ua_key) = t.user(&a, Some("132"));
    let (ub_id, _) = t.user(&b, None);
    let ua = t.as_user(&ua_id, &ua_key);
    let seen: BTreeSet<String> = ua.get("/v2/users").expect(200).body["users"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| str_of(&u["id"]))
        .collect();
    assert_eq!(seen, [ua_id.clone()].into_iter().collect());
    for id in [t.user_id(), ub_id.clone(), other.user_id()] {
        ua.get(&format!("/v2/users/{id}")).expect(404);
        ua.put(
            &format!("/v2/users/{id}"),
            json!({ "user": { "first_name": "x" } }),
        )
        .expect(404);
        ua.delete(&format!("/v2/users/{id}")).expect(404);
    }
    // Users can only be created inside one's scope.
    for loc in [&own, &b] {
        let r = create(&ua, user_body(loc, json!({}))).expect(422);
        assert_eq!(error_fields(&r), fields(&["primary_location_id"]), "{}", r.text);
    }
    let below = t.location(&a, "A1");
    create(&ua, user_body(&below, json!({}))).expect(201);
    create(&ua, user_body(&a, json!({}))).expect(201);
    // The admin above sees them all; the other tenant none of them.
    assert_eq!(
        t.get("/v2/users").expect(200).body["meta"]["pagination"]["totalCount"],
        5
    );
    other.get(&format!("/v2/users/{ua_id}")).expect(404);
    assert_eq!(
        other.get("/v2/users").expect(200).body["meta"]["pagination"]["totalCount"],
        1
    );
}

/// Renewing a key hands the new key to the caller: doing it for a user
/// with more rights than one's own would be a takeover (roles, likewise,
/// are only handed out within one's own rights).
fn key_renewal_cannot_take_over_a_stronger_user(app: &TestApp) {
    let t = app.bootstrap();
    let admin = t.user_id();
    let (uid, key) = t.user(&t.location_id(), Some("132"));
    let integration = t.as_user(&uid, &key);
    // The integration role may not hand out the administrator role...
    let (plain, _) = t.user(&t.location_id(), None);
    let r = integration.post(
        "/v2/authroleusers",
        json!({ "authroleuser": { "user_id": plain, "auth_role_id": "1" } }),
    );
    assert_eq!(r.status, 403, "{}", r.text);
    // ... nor obtain an administrator's key.
    let r = integration.send("POST", &format!("/v2/users/{admin}/generateuserapikey"), None);
    assert_eq!(r.status, 403, "privilege escalation: {}", r.text);
    t.get("/v2/users/me").expect(200);
    // Renewing the key of a user with no more rights than one's own is fine.
    let (peer, peer_key) = t.user(&t.location_id(), Some("132"));
    let r = integration.send("POST", &format!("/v2/users/{peer}/generateuserapikey"), None);
    assert!(r.status == 200 || r.status == 201, "{}", r.text);
    assert_eq!(t.as_user(&peer, &peer_key).get("/v2/users/me").status, 401);
}

/// The keys of the reference's user record, in its order.
const REFERENCE_KEYS: &[&str] = &[
    "id",
    "domain_id",
    "contact_id",
    "username",
    "email",
    "user_type_id",
    "locale",
    "status",
    "tz",
    "login_attempts",
    "current_login_ip",
    "current_login",
    "last_login_ts",
    "requires_new_password",
    "created_ts",
    "modified_ts",
    "primary_location_id",
    "branding_domain_url",
    "created_user_id",
    "terms_condition_id",
    "terms_accepted_ts",
    "terms_agree_ip",
    "ui_prefs",
    "user_api_key",
    "user_hash_key",
    "first_name",
    "last_name",
    "address",
    "city",
    "state",
    "zip",
    "account_number",
    "date_of_birth",
    "email_trx_receipt",
    "company_name",
    "home_phone",
    "cell_phone",
    "office_phone",
    "office_ext_phone",
];

/// Every field of the reference's user record (reference-facts 6.4): the
/// branding domain, login and terms data, `ui_prefs` with its defaults,
/// address and phone fields; null where there is nothing to show, each
/// settable one changed by a PUT, bad values refused without a change.
fn user_record_as_the_reference_has_it(app: &TestApp) {
    let t = app.bootstrap();
    let branch = t.location(&t.location_id(), "Branch");
    let domain = "0123456789abcdef01234567";
    t.put(
        &format!("/v2/locations/{branch}"),
        json!({ "location": { "branding_domain_id": domain } }),
    )
    .expect(200);
    let r = create(&t, user_body(&branch, json!({}))).expect(201);
    let u = r.body["user"].clone();
    let keys: Vec<&str> = u.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(&keys[..REFERENCE_KEYS.len()], REFERENCE_KEYS, "{u}");
    assert_eq!(keys[REFERENCE_KEYS.len()..], ["_links"]);
    assert_eq!(
        u["ui_prefs"],
        json!({ "entry_page": "dashboard", "page_size": 15, "report_export_type": "csv",
            "process_method": "virtual_terminal", "default_terminal": null })
    );
    assert_eq!(u["domain_id"], domain);
    assert_eq!(u["branding_domain_url"], "pay.example.com");
    assert_eq!(u["created_user_id"], t.user_id().as_str());
    assert_eq!(u["email_trx_receipt"], false);
    assert_eq!(u["requires_new_password"], false);
    assert_eq!(u["login_attempts"], 0);
    for empty in [
        "contact_id",
        "current_login_ip",
        "current_login",
        "last_login_ts",
        "terms_condition_id",
        "terms_accepted_ts",
        "terms_agree_ip",
        "address",
        "city",
        "state",
        "zip",
        "account_number",
        "date_of_birth",
        "company_name",
        "home_phone",
        "cell_phone",
        "office_phone",
        "office_ext_phone",
    ] {
        assert!(u[empty].is_null(), "{empty}: {u}");
    }
    let id = str_of(&u["id"]);
    let path = format!("/v2/users/{id}");
    assert_eq!(t.get(&path).expect(200).body["user"], u, "reads back the same");

    // Each settable field, one PUT at a time, read back.
    for (field, value) in [
        ("address", json!("1 Main St")),
        ("city", json!("Austin")),
        ("state", json!("Texas")),
        ("zip", json!("78701")),
        ("account_number", json!("ACCT-1")),
        ("date_of_birth", json!("1980-02-29")),
        ("email_trx_receipt", json!(true)),
        ("company_name", json!("Acme")),
        ("home_phone", json!("5125550100")),
        ("cell_phone", json!("5125550101")),
        ("office_phone", json!("5125550102")),
        ("office_ext_phone", json!("12")),
        ("terms_condition_id", json!("20136422.00")),
        ("terms_agree_ip", json!("24.255.177.186")),
    ] {
        let r = t.put(&path, json!({ "user": { field: value } }));
        assert_eq!(r.status, 200, "{field}: {}", r.text);
        assert_eq!(r.body["user"][field], value, "{field}");
        assert_eq!(t.get(&path).expect(200).body["user"][field], value, "{field}");
    }
    let after = t.get(&path).expect(200).body["user"].clone();
    assert!(
        after["terms_accepted_ts"].is_i64(),
        "accepting terms is recorded: {after}"
    );
    assert_eq!(after["first_name"], u["first_name"], "untouched");

    // ui_prefs: members sent replace those stored; null restores a default.
    let prefs = |r: &Resp| r.body["user"]["ui_prefs"].clone();
    let r = t
        .put(&path, json!({ "user": { "ui_prefs": { "page_size": 50 } } }))
        .expect(200);
    assert_eq!(prefs(&r)["page_size"], 50);
    assert_eq!(prefs(&r)["entry_page"], "dashboard");
    let r = t
        .put(
            &path,
            json!({ "user": { "ui_prefs": { "entry_page": "transactions", "report_export_type": "tsv",
                "process_method": "terminal" } } }),
        )
        .expect(200);
    assert_eq!(
        prefs(&r),
        json!({ "entry_page": "transactions", "page_size": 50, "report_export_type": "tsv",
            "process_method": "terminal", "default_terminal": null })
    );
    let terminal = t
        .post(
            "/v2/terminals",
            json!({ "terminal": { "location_id": branch, "serial_number": "SN-1" } }),
        )
        .expect(201)
        .body["terminal"]["id"]
        .clone();
    let r = t
        .put(
            &path,
            json!({ "user": { "ui_prefs": { "default_terminal": terminal } } }),
        )
        .expect(200);
    assert_eq!(prefs(&r)["default_terminal"], terminal);
    let r = t
        .put(&path, json!({ "user": { "ui_prefs": { "page_size": null } } }))
        .expect(200);
    assert_eq!(prefs(&r)["page_size"], 15, "back to the default");
    assert_eq!(prefs(&r)["entry_page"], "transactions", "the others kept");

    // Refused, and nothing changes.
    let elsewhere = t
        .post(
            "/v2/terminals",
            json!({ "terminal": { "location_id": t.location_id(), "serial_number": "SN-2" } }),
        )
        .expect(201)
        .body["terminal"]["id"]
        .clone();
    let before = t.get(&path).expect(200).body["user"].clone();
    for (field, value) in [
        ("ui_prefs", json!({ "colour": "blue" })),
        ("ui_prefs", json!({ "page_size": 0 })),
        ("ui_prefs", json!({ "page_size": "many" })),
        ("ui_prefs", json!({ "report_export_type": "xls" })),
        ("ui_prefs", json!({ "entry_page": "<script>" })),
        ("ui_prefs", json!({ "default_terminal": elsewhere })),
        (
            "ui_prefs",
            json!({ "default_terminal": "0123456789abcdef0123456789abcdef" }),
        ),
        ("ui_prefs", json!([1])),
        ("terms_agree_ip", json!("not-an-address")),
        ("date_of_birth", json!("2999-01-01")),
        ("date_of_birth", json!("1980-02-30")),
        ("home_phone", json!("555-0100")),
        ("office_phone", json!("12345678901")),
        ("email_trx_receipt", json!("maybe")),
        ("email_trx_receipt", json!(null)),
        ("email_trx_receipt", json!("")),
        ("status", json!("")),
        ("status", json!(null)),
        ("zip", json!("7870$")),
        ("domain_id", json!(domain)),
        ("contact_id", json!(domain)),
        ("branding_domain_url", json!("evil.example.com")),
        ("current_login_ip", json!("127.0.0.1")),
        ("terms_accepted_ts", json!(1)),
        ("last_login_ts", json!(1)),
        ("branding_domain_id", json!(domain)),
    ] {
        let r = t.put(&path, json!({ "user": { field: value } }));
        assert_eq!(r.status, 422, "{field} {value}: {}", r.text);
        assert_eq!(error_fields(&r), fields(&[field]), "{field}: {}", r.text);
    }
    assert_eq!(
        t.get(&path).expect(200).body["user"],
        before,
        "refusals change nothing"
    );

    // A user sets their own preferences and accepts terms without the
    // permission to update users.
    let (reader, key) = t.user(&branch, Some("2"));
    let me = t.as_user(&reader, &key);
    let own = format!("/v2/users/{reader}");
    let r = me
        .put(
            &own,
            json!({ "user": { "ui_prefs": { "page_size": 30 }, "terms_condition_id": "t-2" } }),
        )
        .expect(200);
    assert_eq!(r.body["user"]["ui_prefs"]["page_size"], 30);
    assert!(r.body["user"]["terms_accepted_ts"].is_i64());
    assert_eq!(
        me.put(&own, json!({ "user": { "first_name": "Self" } })).status,
        403,
        "other fields still need users.update"
    );
    assert_eq!(me.put(&path, json!({ "user": { "ui_prefs": {} } })).status, 403);

    // The branding domain: chosen on create, or the primary location's;
    // a location's change reaches its users.
    let r = create(
        &t,
        user_body(&t.location_id(), json!({ "branding_domain_id": domain })),
    )
    .expect(201);
    assert_eq!(r.body["user"]["domain_id"], domain);
    assert_eq!(r.body["user"]["branding_domain_url"], "pay.example.com");
    let chosen = str_of(&r.body["user"]["id"]);
    let r = create(&t, user_body(&t.location_id(), json!({}))).expect(201);
    assert!(r.body["user"]["domain_id"].is_null());
    assert_eq!(r.body["user"]["branding_domain_url"], "localhost");
    let r = create(
        &t,
        user_body(
            &t.location_id(),
            json!({ "branding_domain_id": "fedcba9876543210fedcba98" }),
        ),
    )
    .expect(422);
    assert_eq!(error_fields(&r), fields(&["branding_domain_id"]), "{}", r.text);
    let r = create(
        &t,
        user_body(
            &branch,
            json!({ "ui_prefs": { "page_size": 20 }, "email_trx_receipt": 1, "city": "Reno",
                "terms_condition_id": "t-1", "terms_agree_ip": "2001:db8::1", "date_of_birth": "1990-01-01" }),
        ),
    )
    .expect(201);
    let made = &r.body["user"];
    assert_eq!(made["ui_prefs"]["page_size"], 20);
    assert_eq!(made["ui_prefs"]["entry_page"], "dashboard");
    assert_eq!(made["email_trx_receipt"], true);
    assert_eq!(made["terms_agree_ip"], "2001:db8::1");
    assert!(made["terms_accepted_ts"].is_i64());
    t.put(
        &format!("/v2/locations/{branch}"),
        json!({ "location": { "branding_domain_url": "new.example.com" } }),
    )
    .expect(200);
    for user in [&id, &chosen] {
        let u = t.get(&format!("/v2/users/{user}")).expect(200).body["user"].clone();
        assert_eq!(u["branding_domain_url"], "new.example.com", "{u}");
        assert_eq!(u["domain_id"], domain);
    }

    // With email_trx_receipt on, the user gets a receipt of their sale.
    let (clerk, clerk_key) = t.user(&t.location_id(), Some("1"));
    t.put(
        &format!("/v2/users/{clerk}"),
        json!({ "user": { "email": "clerk@example.com", "email_trx_receipt": 1 } }),
    )
    .expect(200);
    t.as_user(&clerk, &clerk_key)
        .post(
            "/v2/transactions",
            json!({ "transaction": { "action": "sale", "payment_method": "cc",
                "account_number": "4111111111111111", "exp_date": "1239", "transaction_amount": "4.00" } }),
        )
        .expect(201);
    let to_clerk = |t: &Tenant| {
        t.get("/dev/mail?format=json").expect(200).body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["recipient"] == "clerk@example.com")
            .count()
    };
    assert_eq!(to_clerk(&t), 1);
    t.put(
        &format!("/v2/users/{clerk}"),
        json!({ "user": { "email_trx_receipt": 0 } }),
    )
    .expect(200);
    t.as_user(&clerk, &clerk_key)
        .post(
            "/v2/transactions",
            json!({ "transaction": { "action": "sale", "payment_method": "cc",
                "account_number": "4111111111111111", "exp_date": "1239", "transaction_amount": "4.00" } }),
        )
        .expect(201);
    assert_eq!(to_clerk(&t), 1, "off: no receipt");
}

/// Usernames must not hide a control character or surrounding spaces: a
/// sign-in matches the name exactly, so `"  ann  "`, `"ann\n"` and `"ann"`
/// were three accounts that look alike.
fn usernames_are_names_people_can_tell_apart(app: &TestApp) {
    let t = app.bootstrap();
    let loc = t.location_id();
    let base = unique_name("ann");
    for (bad, says) in [
        (format!("{base}\nx"), "control characters"),
        (format!("{base}\tx"), "control characters"),
        (format!("  {base}  "), "begin or end with a space"),
        (format!("{base} "), "begin or end with a space"),
        (format!("{base}\u{a0}x"), "no whitespace but plain spaces"),
    ] {
        let r = create(&t, user_body(&loc, json!({ "username": bad }))).expect(422);
        assert_eq!(error_fields(&r), fields(&["username"]), "{bad:?}: {}", r.text);
        assert!(r.errors("username")[0].contains(says), "{bad:?}: {}", r.text);
    }
    let id = create(
        &t,
        user_body(&loc, json!({ "username": format!("{base} Smith") })),
    )
    .expect(201)
    .body["user"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = t
        .put(
            &format!("/v2/users/{id}"),
            json!({ "user": { "username": format!("{base}\r") } }),
        )
        .expect(422);
    assert!(
        r.errors("username")[0].contains("control characters"),
        "{}",
        r.text
    );
    let user = t.get(&format!("/v2/users/{id}")).expect(200).body["user"].clone();
    assert_eq!(user["username"], format!("{base} Smith"), "nothing changed");
}

/// Deleting a user who got an Authorize.Net emulator pair, opened a
/// hosted form and had a ticket typed on it: all of it goes with the
/// user (the emulator pair used to keep the user for ever: 409 "still
/// used by other records"); the form and the ticket no longer work.
fn a_user_goes_with_what_it_alone_held(app: &TestApp) {
    let t = app.bootstrap();
    let me = t.user_id();
    t.post(&format!("/v2/users/{me}/generateemulatorkey"), json!({}))
        .expect(200);
    let data = json!({ "transaction": { "payment_method": "cc", "action": "sale",
        "transaction_amount": "13.00", "transaction_api_id": "gone-1" } });
    let link = crate::hosted::form_link(&t, "/v2/payform", crate::hosted::fresh_ts(), &data);
    let page = app
        .client()
        .send("GET", &link, &[("accept", "text/html")], None)
        .expect(200);
    let at = page.text.find("action=\"/hosted/").expect("a form") + "action=\"".len();
    let action = page.text[at..at + page.text[at..].find('"').unwrap()].to_string();
    let ticket = crate::hosted::ticket(
        app,
        &t,
        json!({ "ticket": { "payment_method": "cc", "account_number": "4111111111111111",
            "exp_date": "1239", "account_holder_name": "Pat Payer" } }),
    )
    .expect(201)
    .body["ticket"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let mut db = db(app);
    let held = |db: &mut crate::support::db::Db| {
        ["emulator_credentials", "hosted_sessions", "tickets"]
            .map(|table| db.count(&format!("SELECT COUNT(*) FROM {table} WHERE user_id = ?"), &[&me]) > 0)
    };
    // (The ticket's hash-key opened a form of its own.)
    assert_eq!(held(&mut db), [true; 3]);

    let (admin, key) = t.user(&t.location_id(), Some("1"));
    let other = t.as_user(&admin, &key);
    other.delete(&format!("/v2/users/{me}")).expect(204);
    other.get(&format!("/v2/users/{me}")).expect(404);
    assert_eq!(held(&mut db), [false; 3]);
    // The form opens nothing and takes no payment; the ticket fills no
    // vault.
    let body = "account_number=4111111111111111&exp_date=1239&cvv=999";
    let r = app.client().send(
        "POST",
        &action,
        &[("content-type", "application/x-www-form-urlencoded")],
        Some(body),
    );
    assert_eq!(r.status, 404, "{}", r.text);
    let r = other.post(
        "/v2/accountvaults",
        json!({ "accountvault": { "location_id": t.location_id(), "payment_method": "cc", "ticket": ticket } }),
    );
    assert_eq!(r.status, 422, "{}", r.text);
    assert!(r.text.contains("ticket"), "{}", r.text);
    let txs = other.get("/v2/transactions").expect(200);
    assert_eq!(txs.body["meta"]["pagination"]["totalCount"], 0, "nothing charged");
}

/// A delete refused by a reference no rule foresees (here a table an
/// operator added) is a 409 that names what holds the record, on both
/// engines.
fn a_reference_the_rules_miss_is_named(app: &TestApp) {
    let t = app.bootstrap();
    let (user, _) = t.user(&t.location_id(), Some("2"));
    let mut db = db(app);
    db.exec(
        "CREATE TABLE operator_badges (id TEXT PRIMARY KEY, user_id TEXT NOT NULL REFERENCES users(id))",
        &[],
    );
    db.exec(
        "INSERT INTO operator_badges (id, user_id) VALUES ('b1', ?)",
        &[&user],
    );
    let r = t.delete(&format!("/v2/users/{user}")).expect(409);
    assert_eq!(
        r.errors("id"),
        ["The user is still used by other records (operator badges)."],
        "{}",
        r.text
    );
    t.get(&format!("/v2/users/{user}")).expect(200);
    db.exec("DELETE FROM operator_badges", &[]);
    t.delete(&format!("/v2/users/{user}")).expect(204);
}

/// A password sent as a number is not "blank", and changing one's own
/// password without the current one says the current one is required.
fn password_refusals_say_what_is_wrong(app: &TestApp) {
    let t = app.bootstrap();
    let (id, key) = t.user(&t.location_id(), Some("3"));
    t.put(
        &format!("/v2/users/{id}"),
        json!({ "user": { "password": "Chosen1234" } }),
    )
    .expect(200);
    let clerk = t.as_user(&id, &key);
    let own = format!("/v2/users/{id}");
    let r = clerk
        .put(&own, json!({ "user": { "password": 12345678 } }))
        .expect(422);
    assert_eq!(r.errors("password"), ["Password must be a string."], "{}", r.text);
    let r = clerk
        .put(&own, json!({ "user": { "password": "ACLERK123" } }))
        .expect(422);
    assert_eq!(
        r.errors("old_password"),
        ["Old Password is required to change your own password."],
        "{}",
        r.text
    );
    let r = clerk
        .put(
            &own,
            json!({ "user": { "password": "ACLERK123", "old_password": "Wrong1234" } }),
        )
        .expect(422);
    assert_eq!(
        r.errors("old_password"),
        ["Old Password is incorrect."],
        "{}",
        r.text
    );
    let r = clerk
        .put(&own, json!({ "user": { "old_password": "Chosen1234" } }))
        .expect(422);
    assert!(r.errors("password")[0].contains("cannot be blank"), "{}", r.text);
    clerk
        .put(
            &own,
            json!({ "user": { "password": "ACLERK123", "old_password": "Chosen1234" } }),
        )
        .expect(200);
}

/// Every role reads its own record by its id as by `/v2/users/me`
/// (Clerk and Read only used to get 403), and no other user's without
/// `users.read`.
fn any_role_reads_its_own_record_by_id(app: &TestApp) {
    let t = app.bootstrap();
    let loc = t.location_id();
    let (peer, _) = t.user(&loc, Some("132"));
    for role in ["3", "2", "132"] {
        let (id, key) = t.user(&loc, Some(role));
        let u = t.as_user(&id, &key);
        let by_id = u.get(&format!("/v2/users/{id}")).expect(200);
        let me = u.get("/v2/users/me").expect(200);
        assert_eq!(by_id.body, me.body, "role {role}");
        let other = u.get(&format!("/v2/users/{peer}"));
        let may_read_users = u.get("/v2/users").status == 200;
        assert_eq!(other.status == 200, may_read_users, "role {role}: {}", other.text);
    }
    // A user with no role reads nothing, its own record neither.
    let (bare, key) = t.user(&loc, None);
    t.as_user(&bare, &key)
        .get(&format!("/v2/users/{bare}"))
        .expect(403);
}
