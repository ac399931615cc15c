//! Authentication and authorisation: the three credentials as headers,
//! query parameters or HTTP Basic; one 401 for every wrong credential (no
//! oracle); disabled users; roles (none, read only "2", integration "132",
//! administrator "1") and their grants through authroleusers; API key
//! rotation; API keys never shown, logged or stored in clear.

use crate::engine_tests;
use crate::support::{Engine, Resp, Tenant, TestApp};
use base64::Engine as _;
use serde_json::{json, Value};

engine_tests!(
    credentials_by_header_query_or_basic,
    missing_credentials_answer_401,
    unauthorized_answers_challenge_basic,
    wrong_credentials_answer_one_401,
    disabled_user_cannot_authenticate,
    known_callers_follow_changes_made_by_another_process,
    user_without_role_is_forbidden_everywhere,
    read_only_role_reads_but_never_writes,
    expands_withhold_records_the_caller_may_not_read,
    integration_role_does_crud,
    authroleusers_grant_read_list_revoke,
    roles_cannot_be_escalated,
    generated_api_key_replaces_the_old_one,
    api_keys_never_leak,
);

fn ghost() -> String {
    uuid::Uuid::now_v7().simple().to_string()
}

fn comparable(resp: &Resp) -> Value {
    let mut v = resp.body.clone();
    if let Some(o) = v.as_object_mut() {
        o.remove("request_id");
    }
    v
}

fn basic(user: &str, key: &str) -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{key}"))
    )
}

/// A request with exactly these headers (no credentials added).
fn raw(app: &TestApp, method: &str, path: &str, headers: &[(&str, &str)], body: Option<&Value>) -> Resp {
    let text = body.map(Value::to_string);
    app.client().send(method, path, headers, text.as_deref())
}

fn id_of(resp: &Resp, key: &str) -> String {
    resp.body[key]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no {key}.id in {}", resp.text))
        .to_string()
}

#[track_caller]
fn assert_json_error(r: &Resp, status: u16, what: &str) {
    assert_eq!(r.status, status, "{what}: {}", r.text);
    assert!(
        r.body["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{what}: a JSON error body is expected: {:?}",
        r.text
    );
    assert!(
        r.header("content-type")
            .is_some_and(|c| c.starts_with("application/json")),
        "{what}: content-type {:?}",
        r.header("content-type")
    );
}

/// Records of every resource at the tenant's location, made by its admin.
struct Fixture {
    contact: String,
    child: String,
    note: String,
    /// A user with role 132 and its role.
    other: String,
    other_aru: String,
    cc: String,
}

fn fixture(t: &Tenant) -> Fixture {
    let loc = t.location_id();
    let contact = t.contact(json!({ "first_name": "Ann" }))["id"]
        .as_str()
        .unwrap()
        .to_string();
    let child = t.location(&loc, "Branch");
    let note = id_of(
        &t.post(
            "/v2/notes",
            json!({ "note": { "resource": "Contact", "resource_id": contact, "note": "hello" } }),
        )
        .expect(201),
        "note",
    );
    let (other, _) = t.user(&loc, None);
    let other_aru = id_of(
        &t.post(
            "/v2/authroleusers",
            json!({ "authroleuser": { "user_id": other, "auth_role_id": "132" } }),
        )
        .expect(201),
        "authroleuser",
    );
    Fixture {
        contact,
        child,
        note,
        other,
        other_aru,
        cc: t.cred("cc_product_transaction_id"),
    }
}

/// Everything the admin can see, to prove a refused call changed nothing.
fn snapshot(t: &Tenant) -> Vec<Value> {
    [
        "/v2/contacts",
        "/v2/locations",
        "/v2/notes",
        "/v2/users",
        "/v2/authroleusers",
    ]
    .iter()
    .map(|p| t.get(&format!("{p}?page_size=100")).expect(200).body)
    .collect()
}

/// Every write a caller could attempt on the fixture: (method, path, body).
fn writes(t: &Tenant, f: &Fixture, me: &str) -> Vec<(&'static str, String, Option<Value>)> {
    let loc = t.location_id();
    vec![
        (
            "POST",
            "/v2/contacts".into(),
            Some(json!({ "contact": { "location_id": loc, "last_name": "New" } })),
        ),
        (
            "POST",
            "/v2/locations".into(),
            Some(
                json!({ "location": { "parent_id": loc, "name": "New", "branding_domain_url": "pay.example.com" } }),
            ),
        ),
        (
            "POST",
            "/v2/notes".into(),
            Some(json!({ "note": { "resource": "Contact", "resource_id": f.contact, "note": "new" } })),
        ),
        (
            "POST",
            "/v2/users".into(),
            Some(json!({ "user": { "primary_location_id": loc, "username": format!("n{}", ghost()) } })),
        ),
        (
            "POST",
            "/v2/authroleusers".into(),
            Some(json!({ "authroleuser": { "user_id": me, "auth_role_id": "132" } })),
        ),
        (
            "PUT",
            format!("/v2/contacts/{}", f.contact),
            Some(json!({ "contact": { "first_name": "Changed" } })),
        ),
        (
            "PUT",
            format!("/v2/locations/{}", f.child),
            Some(json!({ "location": { "name": "Changed", "parent_id": loc } })),
        ),
        (
            "PUT",
            format!("/v2/notes/{}", f.note),
            Some(json!({ "note": { "note": "changed" } })),
        ),
        (
            "PUT",
            format!("/v2/users/{}", f.other),
            Some(json!({ "user": { "first_name": "Changed" } })),
        ),
        (
            "PUT",
            format!("/v2/users/{me}"),
            Some(json!({ "user": { "first_name": "Changed" } })),
        ),
        ("DELETE", format!("/v2/notes/{}", f.note), None),
        ("DELETE", format!("/v2/contacts/{}", f.contact), None),
        ("DELETE", format!("/v2/locations/{}", f.child), None),
        ("DELETE", format!("/v2/authroleusers/{}", f.other_aru), None),
        ("DELETE", format!("/v2/users/{}", f.other), None),
        ("POST", format!("/v2/users/{}/generateuserapikey", f.other), None),
    ]
}

/// Every read of the fixture: lists and records.
fn reads(t: &Tenant, f: &Fixture, me: &str) -> Vec<String> {
    let loc = t.location_id();
    vec![
        "/v2/contacts".into(),
        "/v2/locations".into(),
        "/v2/locationinfos".into(),
        "/v2/producttransactions".into(),
        "/v2/notes".into(),
        "/v2/users".into(),
        "/v2/authroleusers".into(),
        format!("/v2/contacts/{}", f.contact),
        format!("/v2/locations/{loc}"),
        format!("/v2/locations/{}", f.child),
        format!("/v2/locationinfos/{loc}"),
        format!("/v2/producttransactions/{}", f.cc),
        format!("/v2/notes/{}", f.note),
        format!("/v2/users/{}", f.other),
        format!("/v2/users/{me}"),
        format!("/v2/authroleusers/{}", f.other_aru),
    ]
}

fn credentials_by_header_query_or_basic(app: &TestApp) {
    let t = app.bootstrap();
    let (dev, uid, key) = (t.cred("developer_id"), t.user_id(), t.cred("user_api_key"));
    let c = t.contact(json!({}));
    let cid = c["id"].as_str().unwrap();

    let me = t.get("/v2/users/me").expect(200);
    assert_eq!(me.body["user"]["id"], uid);
    // The expands and checks of /v2/users/{id}.
    let expanded = t.get("/v2/users/me?expand=primary_location").expect(200);
    assert_eq!(
        expanded.body["user"]["primary_location"]["id"],
        t.location_id().as_str(),
        "{}",
        expanded.text
    );
    t.get("/v2/users/me?expand=bogus").expect(422);

    let q = format!("developer-id={dev}&user-id={uid}&user-api-key={key}");
    for path in [
        format!("/v2/users/me?{q}"),
        format!("/v2/contacts?{q}"),
        format!("/v2/contacts/{cid}?{q}"),
        format!("/v2/contacts/{cid}?expand=location&{q}"),
    ] {
        raw(app, "GET", &path, &[], None).expect(200);
    }
    let made = raw(
        app,
        "POST",
        &format!("/v2/contacts?{q}"),
        &[],
        Some(&json!({ "contact": { "location_id": t.location_id(), "last_name": "Q" } })),
    )
    .expect(201);
    assert_eq!(made.body["contact"]["last_name"], "Q");
    raw(
        app,
        "PUT",
        &format!("/v2/contacts/{cid}?{q}"),
        &[],
        Some(&json!({ "contact": { "city": "Reno" } })),
    )
    .expect(200);

    let auth = basic(&uid, &key);
    let r = raw(
        app,
        "GET",
        "/v2/users/me",
        &[("authorization", &auth), ("developer-id", &dev)],
        None,
    )
    .expect(200);
    assert_eq!(r.body["user"]["id"], uid);
    let r = raw(
        app,
        "GET",
        &format!("/v2/contacts/{cid}?developer-id={dev}"),
        &[("authorization", &auth)],
        None,
    )
    .expect(200);
    assert_eq!(r.body["contact"]["city"], "Reno");
    raw(
        app,
        "DELETE",
        &format!("/v2/contacts/{cid}"),
        &[("authorization", &auth), ("developer-id", &dev)],
        None,
    )
    .expect(204);
    // developer-id is always required, Basic or not.
    let r = raw(app, "GET", "/v2/users/me", &[("authorization", &auth)], None);
    assert_json_error(&r, 401, "Basic without developer-id");
}

fn missing_credentials_answer_401(app: &TestApp) {
    let t = app.bootstrap();
    let (dev, uid, key) = (t.cred("developer_id"), t.user_id(), t.cred("user_api_key"));
    let c = t.contact(json!({}));
    let cid = c["id"].as_str().unwrap().to_string();
    let before = snapshot(&t);
    let headers = [("developer-id", &dev), ("user-id", &uid), ("user-api-key", &key)];
    for skip in 0..3 {
        let hs: Vec<(&str, &str)> = headers
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != skip)
            .map(|(_, (k, v))| (*k, v.as_str()))
            .collect();
        let r = raw(app, "GET", "/v2/contacts", &hs, None);
        assert_json_error(&r, 401, &format!("without {}", headers[skip].0));
        // The answer names what is missing, and only that.
        assert!(
            r.text.contains(&format!("missing: {}.", headers[skip].0)),
            "{}",
            r.text
        );
        // Present but empty is missing too.
        let mut empty = hs.clone();
        empty.push((headers[skip].0, ""));
        let r = raw(app, "GET", "/v2/contacts", &empty, None);
        assert_json_error(&r, 401, &format!("empty {}", headers[skip].0));
        // The same with query parameters.
        let q: Vec<String> = hs.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let r = raw(app, "GET", &format!("/v2/contacts?{}", q.join("&")), &[], None);
        assert_json_error(&r, 401, &format!("query without {}", headers[skip].0));
    }
    // No credentials at all, on every kind of endpoint and verb: 401 comes
    // before 404 (unknown id) and 422 (bad body), and nothing is done.
    let g = ghost();
    for (method, path, body) in [
        ("GET", "/v2/contacts".to_string(), None),
        ("GET", format!("/v2/contacts/{cid}"), None),
        ("GET", format!("/v2/contacts/{g}"), None),
        ("POST", "/v2/contacts".to_string(), Some(json!({}))),
        (
            "POST",
            "/v2/contacts".to_string(),
            Some(json!({ "contact": { "location_id": t.location_id(), "last_name": "X" } })),
        ),
        (
            "PUT",
            format!("/v2/contacts/{cid}"),
            Some(json!({ "contact": { "first_name": "X" } })),
        ),
        ("DELETE", format!("/v2/contacts/{cid}"), None),
        ("GET", "/v2/users/me".to_string(), None),
        ("POST", format!("/v2/users/{uid}/generateuserapikey"), None),
        ("GET", "/v2/locationinfos".to_string(), None),
        ("GET", "/v2/producttransactions".to_string(), None),
        ("GET", "/v2/authroleusers".to_string(), None),
        (
            "POST",
            "/v2/authroleusers".to_string(),
            Some(json!({ "authroleuser": { "user_id": uid, "auth_role_id": "2" } })),
        ),
    ] {
        let r = raw(app, method, &path, &[], body.as_ref());
        assert_json_error(&r, 401, &format!("{method} {path} without credentials"));
    }
    assert_eq!(snapshot(&t), before, "refused calls change nothing");
    t.get("/v2/users/me").expect(200);
}

/// RFC 9110 15.5.2: a 401 carries a WWW-Authenticate challenge; the API
/// accepts HTTP Basic, so it offers it.
fn unauthorized_answers_challenge_basic(app: &TestApp) {
    let r = raw(app, "GET", "/v2/contacts", &[], None);
    assert_json_error(&r, 401, "no credentials");
    let challenge = r.header("www-authenticate").unwrap_or_default();
    assert!(
        challenge.to_ascii_lowercase().starts_with("basic"),
        "a 401 must carry WWW-Authenticate: Basic ...; got {challenge:?}"
    );
}

fn wrong_credentials_answer_one_401(app: &TestApp) {
    let t = app.bootstrap();
    let other_tenant = app.bootstrap();
    let (dev, uid, key) = (t.cred("developer_id"), t.user_id(), t.cred("user_api_key"));
    let (u2, k2) = t.user(&t.location_id(), Some("132"));
    let before = snapshot(&t);
    let mut flipped = key.clone();
    let last = flipped.pop().unwrap();
    flipped.push(if last == 'a' { 'b' } else { 'a' });
    let long = "a".repeat(300);
    let variants: Vec<(&str, String, String, String)> = vec![
        ("wrong key", dev.clone(), uid.clone(), format!("K{}", ghost())),
        (
            "key with one character changed",
            dev.clone(),
            uid.clone(),
            flipped,
        ),
        ("another user's key", dev.clone(), uid.clone(), k2.clone()),
        ("this key with another user", dev.clone(), u2.clone(), key.clone()),
        (
            "another tenant's key",
            dev.clone(),
            uid.clone(),
            other_tenant.cred("user_api_key"),
        ),
        (
            "hash key instead of api key",
            dev.clone(),
            uid.clone(),
            t.cred("user_hash_key"),
        ),
        ("overlong key", dev.clone(), uid.clone(), long.clone()),
        ("unknown user", dev.clone(), ghost(), key.clone()),
        ("malformed user id", dev.clone(), "abc".into(), key.clone()),
        ("sql in user id", dev.clone(), "x' OR '1'='1".into(), key.clone()),
        ("overlong user id", dev.clone(), long.clone(), key.clone()),
        ("unknown developer", ghost(), uid.clone(), key.clone()),
        ("malformed developer", "dev".into(), uid.clone(), key.clone()),
        ("overlong developer", long.clone(), uid.clone(), key.clone()),
        ("user id of a location", dev.clone(), t.location_id(), key.clone()),
    ];
    let mut reference: Option<Value> = None;
    for (what, d, u, k) in &variants {
        let as_headers = raw(
            app,
            "GET",
            "/v2/contacts",
            &[("developer-id", d), ("user-id", u), ("user-api-key", k)],
            None,
        );
        let as_query = raw(
            app,
            "GET",
            &format!(
                "/v2/contacts?developer-id={}&user-id={}&user-api-key={}",
                urlencode(d),
                urlencode(u),
                urlencode(k)
            ),
            &[],
            None,
        );
        let auth = basic(u, k);
        let as_basic = raw(
            app,
            "GET",
            "/v2/contacts",
            &[("authorization", &auth), ("developer-id", d)],
            None,
        );
        let as_post = raw(
            app,
            "POST",
            "/v2/contacts",
            &[("developer-id", d), ("user-id", u), ("user-api-key", k)],
            Some(&json!({ "contact": { "location_id": t.location_id(), "last_name": "X" } })),
        );
        for (how, r) in [
            ("headers", &as_headers),
            ("query", &as_query),
            ("basic", &as_basic),
            ("post", &as_post),
        ] {
            assert_json_error(r, 401, &format!("{what} ({how})"));
            let body = comparable(r);
            match &reference {
                None => reference = Some(body),
                Some(first) => assert_eq!(
                    &body, first,
                    "{what} ({how}): every wrong credential answers the same body"
                ),
            }
            assert!(!r.text.contains(k.as_str()), "{what}: the key is echoed");
        }
    }
    assert_eq!(snapshot(&t), before, "nothing was created");
}

fn urlencode(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

fn disabled_user_cannot_authenticate(app: &TestApp) {
    let t = app.bootstrap();
    let (u, k) = t.user(&t.location_id(), Some("132"));
    let user = t.as_user(&u, &k);
    user.get("/v2/users/me").expect(200);
    let wrong = t.as_user(&u, &format!("K{}", ghost())).get("/v2/contacts");
    assert_json_error(&wrong, 401, "wrong key");

    let r = t
        .put(&format!("/v2/users/{u}"), json!({ "user": { "status": 0 } }))
        .expect(200);
    assert_eq!(r.body["user"]["status"], 0);
    for path in ["/v2/users/me", "/v2/contacts"] {
        let r = user.get(path);
        assert_json_error(&r, 401, &format!("disabled user: GET {path}"));
        assert_eq!(
            comparable(&r),
            comparable(&wrong),
            "a disabled user is told no more than a wrong key"
        );
    }
    let dev = t.cred("developer_id");
    let auth = basic(&u, &k);
    let r = raw(
        app,
        "GET",
        "/v2/users/me",
        &[("authorization", &auth), ("developer-id", &dev)],
        None,
    );
    assert_json_error(&r, 401, "disabled user with Basic");
    let r = raw(
        app,
        "POST",
        &format!("/v2/users/{u}/generateuserapikey?developer-id={dev}&user-id={u}&user-api-key={k}"),
        &[],
        None,
    );
    assert_json_error(&r, 401, "a disabled user cannot mint itself a key");

    t.put(&format!("/v2/users/{u}"), json!({ "user": { "status": 1 } }))
        .expect(200);
    user.get("/v2/users/me").expect(200);
}

fn user_without_role_is_forbidden_everywhere(app: &TestApp) {
    let t = app.bootstrap();
    let f = fixture(&t);
    let (u, k) = t.user(&t.location_id(), None);
    let nobody = t.as_user(&u, &k);
    let before = snapshot(&t);

    // Not even its own record: no permission until a role is attached,
    // to read it or to change what one may change on one's own record.
    let me = nobody.get("/v2/users/me").expect(403);
    assert!(me.body["message"].is_string());
    nobody
        .put(
            &format!("/v2/users/{u}"),
            json!({ "user": { "ui_prefs": { "page_size": 7 } } }),
        )
        .expect(403);
    nobody
        .post(&format!("/v2/users/{u}/generateuserapikey"), json!({}))
        .expect(403);

    let mut wrong = Vec::new();
    for path in reads(&t, &f, &u) {
        let r = nobody.get(&path);
        if r.status != 403 || !r.body["message"].is_string() {
            wrong.push(format!("GET {path}: {} {}", r.status, r.text));
        }
    }
    for (method, path, body) in writes(&t, &f, &u) {
        let r = nobody.send(method, &path, body.as_ref().map(|b| b.to_string()).as_deref());
        if r.status != 403 || !r.body["message"].is_string() {
            wrong.push(format!("{method} {path}: {} {}", r.status, r.text));
        }
    }
    // Permission is checked before the body: no validation detail either.
    let r = nobody.post("/v2/contacts", json!({ "contact": {} }));
    if r.status != 403 {
        wrong.push(format!(
            "POST /v2/contacts with a bad body: {} {}",
            r.status, r.text
        ));
    }
    assert!(
        wrong.is_empty(),
        "a user with no role gets 403 everywhere:\n{}",
        wrong.join("\n")
    );
    assert_eq!(snapshot(&t), before, "nothing changed");
    let roles = t.get(&format!("/v2/authroleusers?user_id={u}")).expect(200);
    assert_eq!(
        roles.body["meta"]["pagination"]["totalCount"], 0,
        "it granted itself nothing"
    );
    // A role makes it somebody.
    t.post(
        "/v2/authroleusers",
        json!({ "authroleuser": { "user_id": u, "auth_role_id": "2" } }),
    )
    .expect(201);
    nobody.get("/v2/users/me").expect(200);
}

fn read_only_role_reads_but_never_writes(app: &TestApp) {
    let t = app.bootstrap();
    let f = fixture(&t);
    let (u, k) = t.user(&t.location_id(), Some("2"));
    let reader = t.as_user(&u, &k);
    let before = snapshot(&t);
    let mut wrong = Vec::new();
    for path in reads(&t, &f, &u) {
        let r = reader.get(&path);
        if r.status != 200 {
            wrong.push(format!("GET {path}: {} {}", r.status, r.text));
        }
    }
    for (method, path, body) in writes(&t, &f, &u) {
        let r = reader.send(method, &path, body.as_ref().map(|b| b.to_string()).as_deref());
        if r.status != 403 || !r.body["message"].is_string() {
            wrong.push(format!("{method} {path}: {} {}", r.status, r.text));
        }
    }
    assert!(
        wrong.is_empty(),
        "read only (role 2) reads everything and writes nothing:\n{}",
        wrong.join("\n")
    );
    assert_eq!(snapshot(&t), before, "nothing changed");
}

/// An expand answers null (one record) or [] (a list) where the caller
/// may not read the records it would embed, as for records out of scope:
/// a clerk reads no notes, signatures, users or locations through
/// contacts, transactions and vaults, and the request still succeeds.
fn expands_withhold_records_the_caller_may_not_read(app: &TestApp) {
    let t = app.bootstrap();
    let loc = t.location_id();
    let f = fixture(&t);
    let tx = id_of(
        &t.post(
            "/v2/transactions",
            json!({ "transaction": { "action": "sale", "payment_method": "cc", "contact_id": f.contact,
                "account_number": "4111111111111111", "exp_date": "1239",
                "transaction_amount": "3.00", "product_transaction_id": f.cc } }),
        )
        .expect(201),
        "transaction",
    );
    let vault = id_of(
        &t.post(
            "/v2/accountvaults",
            json!({ "accountvault": { "location_id": loc, "payment_method": "cc",
                "account_number": "4111111111111111", "exp_date": "1239" } }),
        )
        .expect(201),
        "accountvault",
    );
    for (resource, id) in [("Transaction", &tx), ("AccountVault", &vault)] {
        t.post(
            "/v2/signatures",
            json!({ "signature": { "resource": resource, "resource_id": id,
                "signature": "iVBORw0KGgoAAAANSUhEUg==" } }),
        )
        .expect(201);
    }
    let (u, k) = t.user(&loc, Some("3"));
    let clerk = t.as_user(&u, &k);
    for list in ["/v2/notes", "/v2/signatures", "/v2/users", "/v2/locations"] {
        assert_json_error(&clerk.get(list), 403, list);
    }
    let contact_path = format!(
        "/v2/contacts/{}?expand=notes,created_user,location,changelogs",
        f.contact
    );
    let tx_path =
        format!("/v2/transactions/{tx}?expand=signature,created_user,changelogs,location,contact,status");
    let vault_path = format!("/v2/accountvaults/{vault}?expand=signature,created_user,location");

    // The admin sees every one of them.
    let c = &t.get(&contact_path).expect(200).body["contact"];
    assert_eq!(c["notes"].as_array().map(Vec::len), Some(1), "{c}");
    assert!(c["created_user"].is_object() && c["location"].is_object(), "{c}");
    assert!(c["changelogs"][0]["user"].is_object(), "{c}");
    let x = &t.get(&tx_path).expect(200).body["transaction"];
    for key in ["signature", "created_user", "location", "contact"] {
        assert!(x[key].is_object(), "admin {key}: {x}");
    }
    assert!(x["changelogs"][0]["user"].is_object(), "{x}");
    let v = &t.get(&vault_path).expect(200).body["accountvault"];
    assert!(v["signature"].is_object(), "{v}");

    // The clerk: 200, with what he may not read withheld.
    let c = &clerk.get(&contact_path).expect(200).body["contact"];
    assert_eq!(c["id"], f.contact.as_str());
    assert_eq!(c["notes"], json!([]), "{c}");
    assert_eq!(c["created_user"], Value::Null, "{c}");
    assert_eq!(c["location"], Value::Null, "{c}");
    let logs = c["changelogs"].as_array().expect("the contact's own change log");
    assert!(!logs.is_empty());
    assert!(logs.iter().all(|l| l["user"].is_null()), "{c}");
    let x = &clerk.get(&tx_path).expect(200).body["transaction"];
    for key in ["signature", "created_user", "location"] {
        assert_eq!(x[key], Value::Null, "clerk {key}: {x}");
    }
    assert!(
        x["changelogs"]
            .as_array()
            .is_some_and(|l| l.iter().all(|l| l["user"].is_null())),
        "{x}"
    );
    // What he may read still comes: the contact, the transaction's status.
    assert_eq!(x["contact"]["id"], f.contact.as_str(), "{x}");
    assert!(x["status"].is_object(), "{x}");
    let v = &clerk.get(&vault_path).expect(200).body["accountvault"];
    for key in ["signature", "created_user", "location"] {
        assert_eq!(v[key], Value::Null, "clerk vault {key}: {v}");
    }
    // Lists expand the same way.
    let listed = &clerk
        .get(&format!(
            "/v2/contacts?id={}&expand=notes,created_user",
            f.contact
        ))
        .expect(200)
        .body["contacts"][0];
    assert_eq!(listed["notes"], json!([]), "{listed}");
    assert_eq!(listed["created_user"], Value::Null, "{listed}");
}

fn integration_role_does_crud(app: &TestApp) {
    let t = app.bootstrap();
    let loc = t.location_id();
    let (u, k) = t.user(&loc, Some("132"));
    let i = t.as_user(&u, &k);

    // contacts
    let c = id_of(
        &i.post(
            "/v2/contacts",
            json!({ "contact": { "location_id": loc, "last_name": "Int" } }),
        )
        .expect(201),
        "contact",
    );
    i.get(&format!("/v2/contacts/{c}")).expect(200);
    let r = i
        .put(
            &format!("/v2/contacts/{c}"),
            json!({ "contact": { "city": "Oslo" } }),
        )
        .expect(200);
    assert_eq!(r.body["contact"]["city"], "Oslo");
    assert_eq!(
        i.get(&format!("/v2/contacts?id={c}")).expect(200).body["meta"]["pagination"]["totalCount"],
        1
    );
    // notes on it
    let n = id_of(
        &i.post(
            "/v2/notes",
            json!({ "note": { "resource": "Contact", "resource_id": c, "note": "n" } }),
        )
        .expect(201),
        "note",
    );
    i.put(&format!("/v2/notes/{n}"), json!({ "note": { "note": "m" } }))
        .expect(200);
    assert_eq!(
        i.get(&format!("/v2/notes/{n}")).expect(200).body["note"]["note"],
        "m"
    );
    i.get("/v2/notes").expect(200);
    i.delete(&format!("/v2/notes/{n}")).expect(204);
    i.get(&format!("/v2/notes/{n}")).expect(404);
    i.delete(&format!("/v2/contacts/{c}")).expect(204);
    i.get(&format!("/v2/contacts/{c}")).expect(404);

    // locations
    let l = i.location(&loc, "Int branch");
    i.put(
        &format!("/v2/locations/{l}"),
        json!({ "location": { "name": "Renamed", "parent_id": loc } }),
    )
    .expect(200);
    assert_eq!(
        i.get(&format!("/v2/locations/{l}")).expect(200).body["location"]["name"],
        "Renamed"
    );
    i.get("/v2/locations").expect(200);
    i.delete(&format!("/v2/locations/{l}")).expect(204);
    i.get(&format!("/v2/locations/{l}")).expect(404);

    // location infos
    i.get("/v2/locationinfos").expect(200);
    i.get(&format!("/v2/locationinfos/{loc}")).expect(200);

    // users and their roles
    let (v, _) = i.user(&loc, None);
    i.get(&format!("/v2/users/{v}")).expect(200);
    i.put(
        &format!("/v2/users/{v}"),
        json!({ "user": { "first_name": "Vic" } }),
    )
    .expect(200);
    i.get("/v2/users").expect(200);
    for role in ["132", "2"] {
        let a = id_of(
            &i.post(
                "/v2/authroleusers",
                json!({ "authroleuser": { "user_id": v, "auth_role_id": role } }),
            )
            .expect(201),
            "authroleuser",
        );
        i.get(&format!("/v2/authroleusers/{a}")).expect(200);
        i.delete(&format!("/v2/authroleusers/{a}")).expect(204);
    }
    i.get("/v2/authroleusers").expect(200);
    i.delete(&format!("/v2/users/{v}")).expect(204);
    i.get(&format!("/v2/users/{v}")).expect(404);
}

fn authroleusers_grant_read_list_revoke(app: &TestApp) {
    let t = app.bootstrap();
    let (u, k) = t.user(&t.location_id(), None);
    let user = t.as_user(&u, &k);
    assert_json_error(&user.get("/v2/contacts"), 403, "no role yet");

    let created = t
        .post(
            "/v2/authroleusers",
            json!({ "authroleuser": { "user_id": u, "auth_role_id": "132" } }),
        )
        .expect(201);
    let aru = &created.body["authroleuser"];
    let id = aru["id"].as_str().unwrap().to_string();
    assert!((24..=36).contains(&id.len()), "id {id}");
    assert_eq!(aru["user_id"], u);
    assert_eq!(aru["auth_role_id"], "132");
    assert_eq!(
        aru["_links"]["self"]["href"],
        format!("{}/v2/authroleusers/{id}", app.base)
    );
    user.get("/v2/contacts").expect(200);

    let read = t.get(&format!("/v2/authroleusers/{id}")).expect(200);
    assert_eq!(read.body["authroleuser"], *aru);
    let list = t.get(&format!("/v2/authroleusers?user_id={u}")).expect(200);
    assert_eq!(list.body["meta"]["pagination"]["totalCount"], 1);
    assert_eq!(list.body["authroleusers"][0], *aru);

    // Refusals: 422 naming the field, nothing created.
    for (body, field) in [
        (json!({ "user_id": u, "auth_role_id": "132" }), "auth_role_id"),
        (json!({ "user_id": u, "auth_role_id": "999" }), "auth_role_id"),
        (json!({ "user_id": u, "auth_role_id": "" }), "auth_role_id"),
        (json!({ "user_id": u }), "auth_role_id"),
        (json!({ "auth_role_id": "2" }), "user_id"),
        (json!({ "user_id": ghost(), "auth_role_id": "2" }), "user_id"),
    ] {
        let r = t
            .post("/v2/authroleusers", json!({ "authroleuser": body.clone() }))
            .expect(422);
        assert!(!r.errors(field).is_empty(), "{body}: {}", r.text);
    }
    let list = t.get(&format!("/v2/authroleusers?user_id={u}")).expect(200);
    assert_eq!(list.body["meta"]["pagination"]["totalCount"], 1);

    // No update.
    let r = t.put(
        &format!("/v2/authroleusers/{id}"),
        json!({ "authroleuser": { "auth_role_id": "1" } }),
    );
    assert_json_error(&r, 405, "PUT authroleuser");

    let del = t.delete(&format!("/v2/authroleusers/{id}")).expect(204);
    assert!(del.text.is_empty(), "204 has no body");
    assert_json_error(&user.get("/v2/contacts"), 403, "role revoked at once");
    assert_json_error(
        &t.delete(&format!("/v2/authroleusers/{id}")),
        404,
        "second delete",
    );
    assert_json_error(&t.get(&format!("/v2/authroleusers/{id}")), 404, "deleted role");
    let list = t.get(&format!("/v2/authroleusers?user_id={u}")).expect(200);
    assert_eq!(list.body["meta"]["pagination"]["totalCount"], 0);
    // The role can be granted again.
    t.post(
        "/v2/authroleusers",
        json!({ "authroleuser": { "user_id": u, "auth_role_id": "2" } }),
    )
    .expect(201);
    user.get("/v2/contacts").expect(200);
    assert_json_error(
        &user.post(
            "/v2/contacts",
            json!({ "contact": { "location_id": t.location_id(), "last_name": "X" } }),
        ),
        403,
        "read only after the new grant",
    );
}

/// Roles are handed out by a user of the same or a higher level: an
/// integration user (132) cannot reach an administrator's powers, neither
/// by granting role 1 nor by taking over or demoting an administrator.
fn roles_cannot_be_escalated(app: &TestApp) {
    let t = app.bootstrap();
    let loc = t.location_id();
    let (iu, ik) = t.user(&loc, Some("132"));
    let i = t.as_user(&iu, &ik);
    let (v, _) = t.user(&loc, None);
    let (ru, rk) = t.user(&loc, Some("2"));
    let reader = t.as_user(&ru, &rk);
    let roles_of = |user: &str| -> Vec<(String, String)> {
        t.get(&format!("/v2/authroleusers?user_id={user}&page_size=100"))
            .expect(200)
            .body["authroleusers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["id"].as_str().unwrap().to_string(),
                    r["auth_role_id"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };

    let mut wrong = Vec::new();
    for (who, role) in [(&iu, "1"), (&v, "1")] {
        check(
            &mut wrong,
            &format!("132 grants role {role} to {who}"),
            i.post(
                "/v2/authroleusers",
                json!({ "authroleuser": { "user_id": who, "auth_role_id": role } }),
            ),
            403,
        );
    }
    check(
        &mut wrong,
        "read only grants role 2",
        reader.post(
            "/v2/authroleusers",
            json!({ "authroleuser": { "user_id": v, "auth_role_id": "2" } }),
        ),
        403,
    );
    check(
        &mut wrong,
        "read only grants itself 132",
        reader.post(
            "/v2/authroleusers",
            json!({ "authroleuser": { "user_id": ru, "auth_role_id": "132" } }),
        ),
        403,
    );
    for (who, want) in [(&iu, vec!["132"]), (&v, vec![]), (&ru, vec!["2"])] {
        let got: Vec<String> = roles_of(who).into_iter().map(|(_, r)| r).collect();
        if got != want {
            wrong.push(format!("{who} now holds roles {got:?}"));
        }
    }

    // Taking over or demoting an administrator: each attempt on a fresh
    // administrator, who must come out of it intact.
    for attack in ["mint its API key", "disable it", "revoke its role 1", "delete it"] {
        let (victim, victim_key) = t.user(&loc, Some("1"));
        let victim_aru = roles_of(&victim)[0].0.clone();
        let r = match attack {
            "mint its API key" => i.post(&format!("/v2/users/{victim}/generateuserapikey"), json!({})),
            "disable it" => i.put(&format!("/v2/users/{victim}"), json!({ "user": { "status": 0 } })),
            "revoke its role 1" => i.delete(&format!("/v2/authroleusers/{victim_aru}")),
            _ => i.delete(&format!("/v2/users/{victim}")),
        };
        check(
            &mut wrong,
            &format!("132 tries to {attack} (an administrator)"),
            r,
            403,
        );
        let me = t.as_user(&victim, &victim_key).get("/v2/users/me");
        if me.status != 200 {
            wrong.push(format!(
                "after the attempt to {attack}, the administrator cannot act: {} {}",
                me.status, me.text
            ));
        }
        let roles = t.get(&format!("/v2/authroleusers?user_id={victim}"));
        if roles.body["meta"]["pagination"]["totalCount"] != 1 {
            wrong.push(format!(
                "after the attempt to {attack}, the administrator's roles are {}",
                roles.text
            ));
        }
    }

    // Within its own rights the integration user may grant.
    check(
        &mut wrong,
        "132 grants role 2",
        i.post(
            "/v2/authroleusers",
            json!({ "authroleuser": { "user_id": v, "auth_role_id": "2" } }),
        ),
        201,
    );
    check(
        &mut wrong,
        "132 grants role 132",
        i.post(
            "/v2/authroleusers",
            json!({ "authroleuser": { "user_id": v, "auth_role_id": "132" } }),
        ),
        201,
    );
    assert!(wrong.is_empty(), "escalation:\n{}", wrong.join("\n"));
}

fn check(wrong: &mut Vec<String>, what: &str, r: Resp, status: u16) {
    if r.status != status {
        wrong.push(format!("{what}: expected {status}, got {} {}", r.status, r.text));
    }
}

fn generated_api_key_replaces_the_old_one(app: &TestApp) {
    let t = app.bootstrap();
    let (u, k1) = t.user(&t.location_id(), Some("132"));
    t.as_user(&u, &k1).get("/v2/users/me").expect(200);

    // An administrator rotates the user's key (empty body).
    let r = t.send("POST", &format!("/v2/users/{u}/generateuserapikey"), None);
    assert!(r.status == 200 || r.status == 201, "{}", r.text);
    let k2 = r.body["user"]["user_api_key"]
        .as_str()
        .unwrap_or_else(|| panic!("{{user:{{user_api_key}}}} expected: {}", r.text))
        .to_string();
    assert!((24..=64).contains(&k2.len()), "{k2}");
    assert!(k2.chars().all(|c| c.is_ascii_alphanumeric()), "{k2}");
    assert_ne!(k2, k1);
    assert_eq!(
        t.as_user(&u, &k2).get("/v2/users/me").expect(200).body["user"]["id"],
        u
    );
    assert_json_error(&t.as_user(&u, &k1).get("/v2/users/me"), 401, "the old key");
    let read = t.get(&format!("/v2/users/{u}")).expect(200);
    assert_eq!(read.body["user"]["user_api_key"], Value::Null);

    // A user rotates its own key ("{}" body this time).
    let me = t.as_user(&u, &k2);
    let r = me.post(&format!("/v2/users/{u}/generateuserapikey"), json!({}));
    assert!(r.status == 200 || r.status == 201, "{}", r.text);
    let k3 = r.body["user"]["user_api_key"].as_str().unwrap().to_string();
    assert!(k3 != k2 && k3 != k1);
    t.as_user(&u, &k3).get("/v2/contacts").expect(200);
    assert_json_error(&me.get("/v2/contacts"), 401, "the second key");

    // The administrator's own key too.
    let r = t.send(
        "POST",
        &format!("/v2/users/{}/generateuserapikey", t.user_id()),
        None,
    );
    assert!(r.status == 200 || r.status == 201, "{}", r.text);
    let ka = r.body["user"]["user_api_key"].as_str().unwrap().to_string();
    assert_json_error(&t.get("/v2/users/me"), 401, "the admin's old key");
    let admin = t.as_user(&t.user_id(), &ka);
    admin.get("/v2/users/me").expect(200);

    // Unknown user: 404, and keys of nobody change.
    assert_json_error(
        &admin.post(&format!("/v2/users/{}/generateuserapikey", ghost()), json!({})),
        404,
        "unknown user",
    );
    t.as_user(&u, &k3).get("/v2/users/me").expect(200);

    // The change log shows the rotation, masked.
    let logs = admin.get(&format!("/v2/users/{u}?expand=changelogs")).expect(200);
    for k in [&k1, &k2, &k3] {
        assert!(!logs.text.contains(k.as_str()), "a key in the change log");
    }
}

fn api_keys_never_leak(app: &TestApp) {
    let t = app.bootstrap();
    let loc = t.location_id();
    let (dev, uid) = (t.cred("developer_id"), t.user_id());
    let mut secrets = vec![t.cred("user_api_key"), t.cred("user_hash_key")];
    let key = format!("Key{}", ghost());
    let hash = format!("Hash{}", ghost());
    secrets.push(key.clone());
    secrets.push(hash.clone());
    let mut seen: Vec<(String, Resp)> = Vec::new();

    let created = t
        .post(
            "/v2/users",
            json!({ "user": { "primary_location_id": loc, "username": format!("s{}", ghost()),
                "email": "s@example.com", "user_api_key": key, "user_hash_key": hash } }),
        )
        .expect(201);
    let u = id_of(&created, "user");
    seen.push(("POST /v2/users".into(), created));
    t.post(
        "/v2/authroleusers",
        json!({ "authroleuser": { "user_id": u, "auth_role_id": "132" } }),
    )
    .expect(201);
    let user = t.as_user(&u, &key);
    user.contact(json!({}));
    user.contact(json!({}));

    // Invalid keys are refused without being echoed.
    for (field, bad) in [
        ("user_api_key", format!("short{}", &ghost()[..4])),
        ("user_api_key", format!("has spaces and symbols {}!", ghost())),
        ("user_hash_key", format!("has spaces and symbols {}!", ghost())),
    ] {
        let r = t
            .post(
                "/v2/users",
                json!({ "user": { "primary_location_id": loc, "username": format!("b{}", ghost()), field: bad } }),
            )
            .expect(422);
        assert!(!r.errors(field).is_empty(), "{}", r.text);
        secrets.push(bad);
        seen.push((format!("POST /v2/users with a bad {field}"), r));
    }
    // A wrong key presented is not echoed either.
    let presented = format!("Wrong{}", ghost());
    secrets.push(presented.clone());
    seen.push((
        "GET with a wrong key".into(),
        t.as_user(&u, &presented).get("/v2/contacts"),
    ));
    // Query-string credentials stay out of the pagination links.
    let q = format!("developer-id={dev}&user-id={u}&user-api-key={key}&page_size=1");
    let listed = raw(app, "GET", &format!("/v2/contacts?{q}"), &[], None).expect(200);
    assert!(listed.body["meta"]["pagination"]["links"]["next"].is_object());
    seen.push(("GET /v2/contacts with query credentials".into(), listed));
    for path in [
        format!("/v2/users/{u}"),
        format!("/v2/users/{u}?expand=changelogs,created_user,primary_location"),
        "/v2/users?page_size=100".into(),
        "/v2/users/me".into(),
        format!("/v2/users/{uid}"),
        "/v2/authroleusers?expand=user,created_user".into(),
        "/v2/contacts?expand=created_user,changelogs".into(),
        format!("/v2/locations/{loc}?expand=created_user,changelogs"),
    ] {
        seen.push((format!("GET {path} (admin)"), t.get(&path).expect(200)));
        seen.push((format!("GET {path} (user)"), user.get(&path).expect(200)));
    }
    // A rotated key is shown once, in the answer to the rotation only.
    let rotated = user.post(&format!("/v2/users/{u}/generateuserapikey"), json!({}));
    let new_key = rotated.body["user"]["user_api_key"].as_str().unwrap().to_string();
    let user = t.as_user(&u, &new_key);
    seen.push((
        "GET user after rotation".into(),
        user.get(&format!("/v2/users/{u}?expand=changelogs")).expect(200),
    ));
    seen.push((
        "GET me after rotation".into(),
        user.get("/v2/users/me").expect(200),
    ));
    secrets.push(new_key);

    for (what, r) in &seen {
        for s in &secrets {
            assert!(
                !r.text.contains(s.as_str()),
                "{what}: a key in the answer: {}",
                r.text
            );
        }
        for rec in records(&r.body) {
            assert_eq!(rec["user_api_key"], Value::Null, "{what}: {}", r.text);
            assert_eq!(rec["user_hash_key"], Value::Null, "{what}: {}", r.text);
        }
    }

    // Not in the log (credentials went by header, query and Basic).
    let auth = basic(&u, &key);
    raw(
        app,
        "GET",
        "/v2/users/me",
        &[("authorization", &auth), ("developer-id", &dev)],
        None,
    );
    let log = app.log();
    assert!(log.contains("request finished"), "the log is written: {log}");
    for s in &secrets {
        assert!(!log.contains(s.as_str()), "a key in the server log: {s}");
    }

    // Not in the database in clear.
    let stored = database_text(app);
    assert!(
        stored.iter().any(|v| v.contains(&u)),
        "the scan reads the users table"
    );
    for s in &secrets {
        for v in &stored {
            assert!(!v.contains(s.as_str()), "a key stored in clear: {v}");
        }
    }
    if app.engine == Engine::Sqlite {
        let path = app.database_url.trim_start_matches("sqlite://").to_string();
        for file in [path.clone(), format!("{path}-wal")] {
            let bytes = std::fs::read(&file).unwrap_or_default();
            for s in &secrets {
                assert!(
                    !bytes.windows(s.len()).any(|w| w == s.as_bytes()),
                    "{file} holds a key in clear"
                );
            }
        }
    }
}

/// User records inside a response (single, list, expands, me).
fn records(body: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    fn walk<'a>(v: &'a Value, out: &mut Vec<&'a Value>, parent_key: &str) {
        match v {
            Value::Object(o) => {
                if matches!(parent_key, "user" | "users" | "created_user") && o.contains_key("username") {
                    out.push(v);
                }
                for (k, x) in o {
                    walk(x, out, k);
                }
            }
            Value::Array(a) => {
                for x in a {
                    walk(x, out, parent_key);
                }
            }
            _ => {}
        }
    }
    walk(body, &mut out, "");
    out
}

/// Every text value of every table of the app's database.
fn database_text(app: &TestApp) -> Vec<String> {
    let mut out = Vec::new();
    match app.engine {
        Engine::Sqlite => {
            let path = app.database_url.trim_start_matches("sqlite://");
            let conn =
                rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
                    .expect("open the database");
            let tables: Vec<String> = conn
                .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
                .unwrap()
                .query_map([], |r| r.get(0))
                .unwrap()
                .map(Result::unwrap)
                .collect();
            assert!(tables.iter().any(|t| t == "users"));
            for table in tables {
                let mut stmt = conn.prepare(&format!("SELECT * FROM \"{table}\"")).unwrap();
                let n = stmt.column_count();
                let mut rows = stmt.query([]).unwrap();
                while let Some(row) = rows.next().unwrap() {
                    for i in 0..n {
                        if let rusqlite::types::ValueRef::Text(t) = row.get_ref(i).unwrap() {
                            out.push(String::from_utf8_lossy(t).into_owned());
                        }
                    }
                }
            }
        }
        Engine::Postgres => {
            let mut client =
                postgres::Client::connect(&app.database_url, postgres::NoTls).expect("connect to postgres");
            let tables: Vec<String> = client
                .query(
                    "SELECT table_name::text FROM information_schema.tables WHERE table_schema = 'public'",
                    &[],
                )
                .unwrap()
                .iter()
                .map(|r| r.get(0))
                .collect();
            assert!(tables.iter().any(|t| t == "users"));
            for table in tables {
                for row in client
                    .query(&format!("SELECT row_to_json(t)::text FROM \"{table}\" t"), &[])
                    .unwrap()
                {
                    out.push(row.get(0));
                }
            }
        }
    }
    out
}

/// A node keeps the callers it authenticated (ADR 0021); a change made by
/// another process (here `ferrogate testclock advance`, which moves the
/// location's clock that every caller carries) is seen by the very next
/// request, and so is a user disabled after the caller was kept.
fn known_callers_follow_changes_made_by_another_process(app: &TestApp) {
    let t = app.bootstrap();
    let before = t.contact(json!({ "last_name": "Before" }));
    let created = before["created_ts"].as_i64().unwrap();
    let out = std::process::Command::new(crate::support::BIN)
        .args([
            "testclock",
            "advance",
            "--location-id",
            &t.location_id(),
            "--seconds",
            "864000",
        ])
        .env("FERROGATE_DATABASE_URL", &app.database_url)
        .env("FERROGATE_DATA_KEY", &app.data_key)
        .output()
        .expect("run testclock advance");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let after = t.contact(json!({ "last_name": "After" }));
    let moved = after["created_ts"].as_i64().unwrap() - created;
    assert!(
        moved >= 864_000,
        "the next request carries the moved clock ({moved} s)"
    );

    // A user's requests, then the user disabled: refused at once.
    let (u, k) = t.user(&t.location_id(), Some("132"));
    let user = t.as_user(&u, &k);
    for _ in 0..3 {
        user.get("/v2/contacts").expect(200);
    }
    t.put(&format!("/v2/users/{u}"), json!({ "user": { "status": 0 } }))
        .expect(200);
    user.get("/v2/contacts").expect(401);
    t.put(&format!("/v2/users/{u}"), json!({ "user": { "status": 1 } }))
        .expect(200);
    user.get("/v2/contacts").expect(200);
}
