//! Users with passwords and the token method of authentication: sign in,
//! a one-time password, changing one's own, idle expiry on the test clock,
//! signing out, and the limits on failed sign-ins.

use crate::engine_tests;
use crate::support::db::db;
use crate::support::{Client, Resp, Tenant, TestApp};
use serde_json::{json, Value};

engine_tests!(passwords_and_session_tokens, failed_sign_ins_are_limited);

fn sign_in(c: &Client, username: &str, password: &str) -> Resp {
    let body = json!({ "username": username, "password": password, "domain": "pay.example.com" });
    c.send("POST", "/v2/token", &[], Some(&body.to_string()))
}

fn with_token(c: &Client, method: &str, path: &str, token: &str, body: Option<Value>) -> Resp {
    let text = body.map(|b| b.to_string());
    c.send(method, path, &[("access-token", token)], text.as_deref())
}

fn advance(t: &Tenant, seconds: i64) {
    t.post(
        "/v2/developer/testclock/advance",
        json!({ "testclock": { "seconds": seconds } }),
    )
    .expect(200);
}

/// A user made by the admin with a password and the read-only role.
fn reader(t: &Tenant, username: &str, password: &str) -> (String, Resp) {
    let r = t.post(
        "/v2/users",
        json!({ "user": { "primary_location_id": t.location_id(), "username": username,
            "email": "pat@example.com", "password": password } }),
    );
    assert_eq!(r.status, 201, "{}", r.text);
    let id = r.body["user"]["id"].as_str().unwrap().to_string();
    t.post(
        "/v2/authroleusers",
        json!({ "authroleuser": { "user_id": id, "auth_role_id": "2" } }),
    )
    .expect(201);
    (id, r)
}

fn passwords_and_session_tokens(app: &TestApp) {
    let t = app.bootstrap();
    let c = app.client();
    // Rules, and a password never comes back.
    let r = t.post(
        "/v2/users",
        json!({ "user": { "primary_location_id": t.location_id(), "username": "weak",
            "email": "w@example.com", "password": "short1" } }),
    );
    assert_eq!(r.status, 422, "{}", r.text);
    assert!(r.body["errors"]["password"].is_array(), "{}", r.text);
    assert!(!r.text.contains("short1"));
    let (id, created) = reader(&t, "pat", "Welcome123");
    let user = &created.body["user"];
    assert!(
        user.get("password").is_none() && user.get("password_hash").is_none(),
        "{user}"
    );
    assert!(!created.text.contains("Welcome123") && !created.text.contains("argon2"));
    assert_eq!(
        user["requires_new_password"], true,
        "set by another user: one-time"
    );

    // A wrong password is counted; the right one opens a session.
    let r = sign_in(&c, "pat", "Wrong1234");
    assert_eq!(r.status, 401, "{}", r.text);
    assert_eq!(
        t.get(&format!("/v2/users/{id}")).expect(200).body["user"]["login_attempts"],
        1
    );
    for missing in ["username", "password", "domain"] {
        let mut body = json!({ "username": "pat", "password": "Welcome123", "domain": "pay.example.com" });
        body.as_object_mut().unwrap().remove(missing);
        let r = c.send("POST", "/v2/token", &[], Some(&body.to_string()));
        assert_eq!(r.status, 422, "{}", r.text);
        assert!(r.body["errors"][missing].is_array(), "{}", r.text);
    }
    let r = sign_in(&c, "pat", "Welcome123");
    assert_eq!(r.status, 201, "{}", r.text);
    let session = &r.body["token"];
    assert_eq!(session["username"], "pat");
    assert_eq!(session["expire"], 15);
    assert_eq!(session["requires_new_password"], true);
    assert_eq!(session["primary_location_id"], t.location_id().as_str());
    let token = session["token"].as_str().unwrap().to_string();
    let after = t.get(&format!("/v2/users/{id}")).expect(200).body["user"].clone();
    assert_eq!(after["login_attempts"], 0, "reset by a sign-in");
    assert!(after["last_login_ts"].is_i64());
    // The login data of the reference's record: this sign-in, and where
    // it came from.
    assert_eq!(after["current_login_ip"], "127.0.0.1", "{after}");
    let current = after["current_login"]
        .as_str()
        .unwrap_or_else(|| panic!("{after}"));
    assert!(
        chrono::DateTime::parse_from_str(current, "%Y-%m-%dT%H:%M:%S%z").is_ok(),
        "{current}"
    );
    assert_eq!(
        after["last_login_ts"], session["time"],
        "the first sign-in is also the last"
    );

    // Until the user sets their own password, the session only does that.
    let r = with_token(&c, "GET", "/v2/contacts", &token, None);
    assert_eq!(r.status, 403, "{}", r.text);
    with_token(&c, "GET", "/v2/users/me", &token, None).expect(200);
    let own = format!("/v2/users/{id}");
    // Nothing else of the user changes meanwhile, with the password or
    // without it: not even what users may change on their own record
    // without `users.update` (their terms, their preferences).
    for body in [
        json!({ "user": { "terms_agree_ip": "203.0.113.9" } }),
        json!({ "user": { "password": "Mine45678", "old_password": "Welcome123", "terms_agree_ip": "203.0.113.9" } }),
        json!({ "user": { "first_name": "Changed" } }),
    ] {
        let r = with_token(&c, "PUT", &own, &token, Some(body));
        assert_eq!(r.status, 403, "{}", r.text);
        assert!(r.text.contains("A new password is required"), "{}", r.text);
    }
    let unchanged = t.get(&own).expect(200).body["user"].clone();
    assert!(unchanged["terms_agree_ip"].is_null(), "{unchanged}");
    assert_ne!(unchanged["first_name"], "Changed", "{unchanged}");
    assert_eq!(unchanged["requires_new_password"], true, "{unchanged}");
    let r = with_token(
        &c,
        "PUT",
        &own,
        &token,
        Some(json!({ "user": { "password": "Mine45678" } })),
    );
    assert_eq!(r.status, 422, "the current password is needed: {}", r.text);
    assert!(r.body["errors"]["old_password"].is_array(), "{}", r.text);
    let r = with_token(
        &c,
        "PUT",
        &own,
        &token,
        Some(json!({ "user": { "password": "Mine45678", "old_password": "Welcome124" } })),
    );
    assert_eq!(r.status, 422, "{}", r.text);
    let r = with_token(
        &c,
        "PUT",
        &own,
        &token,
        Some(json!({ "user": { "password": "Mine45678", "old_password": "Welcome123" } })),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["user"]["requires_new_password"], false);
    let r = with_token(&c, "GET", "/v2/users/me", &token, None);
    assert_eq!(r.status, 401, "a new password ends the sessions: {}", r.text);
    assert_eq!(
        sign_in(&c, "pat", "Welcome123").status,
        401,
        "the old password is gone"
    );

    // The token works as a header and as a query parameter, and each use
    // starts the 15 idle minutes again (on the location's test clock).
    let token = sign_in(&c, "pat", "Mine45678").expect(201).body["token"]["token"]
        .as_str()
        .unwrap()
        .to_string();
    with_token(&c, "GET", "/v2/contacts", &token, None).expect(200);
    c.send("GET", &format!("/v2/contacts?access-token={token}"), &[], None)
        .expect(200);
    // A session acts as its user only: another tenant's records are not
    // there for it.
    let other = app.bootstrap();
    let theirs = other.contact(json!({}))["id"].as_str().unwrap().to_string();
    let r = with_token(&c, "GET", &format!("/v2/contacts/{theirs}"), &token, None);
    assert_eq!(r.status, 404, "{}", r.text);
    advance(&t, 14 * 60);
    with_token(&c, "GET", "/v2/contacts", &token, None).expect(200);
    advance(&t, 14 * 60);
    with_token(&c, "GET", "/v2/contacts", &token, None).expect(200);
    advance(&t, 16 * 60);
    let r = with_token(&c, "GET", "/v2/contacts", &token, None);
    assert_eq!(r.status, 401, "15 idle minutes end it: {}", r.text);

    // Signing out.
    let token = sign_in(&c, "pat", "Mine45678").expect(201).body["token"]["token"]
        .as_str()
        .unwrap()
        .to_string();
    c.send("DELETE", &format!("/v2/token/{token}"), &[], None)
        .expect(204);
    assert_eq!(
        c.send("DELETE", &format!("/v2/token/{token}"), &[], None).status,
        404
    );
    assert_eq!(with_token(&c, "GET", "/v2/contacts", &token, None).status, 401);
    let signed_out = token.clone();

    // The admin sets a new password: one-time again, sessions end.
    let token = sign_in(&c, "pat", "Mine45678").expect(201).body["token"]["token"]
        .as_str()
        .unwrap()
        .to_string();
    let r = t.put(&own, json!({ "user": { "password": "Reset2024x" } }));
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["user"]["requires_new_password"], true);
    assert_eq!(with_token(&c, "GET", "/v2/users/me", &token, None).status, 401);
    let live = sign_in(&c, "pat", "Reset2024x").expect(201).body["token"]["token"]
        .as_str()
        .unwrap()
        .to_string();
    with_token(&c, "GET", "/v2/users/me", &live, None).expect(200);
    // At rest, no column of any table holds a password or a session
    // token in clear, whether the session is live, ended or signed out.
    let mut conn = db(app);
    for secret in [
        "Welcome123",
        "Mine45678",
        "Reset2024x",
        live.as_str(),
        token.as_str(),
        signed_out.as_str(),
    ] {
        let found = conn.columns_containing(secret);
        assert!(found.is_empty(), "{secret} is stored in clear in {found:?}");
    }
    assert!(
        conn.columns_containing(&id).contains(&"users.id".to_string()),
        "the scan reads the tables"
    );
    // A disabled user cannot sign in.
    t.put(&own, json!({ "user": { "status": 0 } })).expect(200);
    assert_eq!(sign_in(&c, "pat", "Reset2024x").status, 401);

    // A user whose last sign-in was never signed out (its session long
    // idle) is deleted like any other, and its sessions with it.
    let (idle, _) = reader(&t, "idle", "Idle12345x");
    let idle_token = sign_in(&c, "idle", "Idle12345x").expect(201).body["token"]["token"]
        .as_str()
        .unwrap()
        .to_string();
    advance(&t, 3600);
    with_token(&c, "GET", "/v2/users/me", &idle_token, None).expect(401);
    t.delete(&format!("/v2/users/{idle}")).expect(204);
    let sessions = crate::support::db::db(app).count(
        "SELECT COUNT(*) FROM user_sessions WHERE user_id = ?",
        &[idle.as_str()],
    );
    assert_eq!(sessions, 0);

    // No password reached the log.
    let log = app.log();
    for secret in [
        "Welcome123",
        "Mine45678",
        "Reset2024x",
        token.as_str(),
        signed_out.as_str(),
        live.as_str(),
    ] {
        assert!(!log.contains(secret), "{secret} is in the log");
    }
}

fn failed_sign_ins_are_limited(app: &TestApp) {
    let t = app.bootstrap();
    let c = app.client();
    reader(&t, "sam", "Welcome123");
    // Five failures in a row lock the user, even against the right
    // password, until the lock's time has passed (the test clock).
    for _ in 0..5 {
        assert_eq!(sign_in(&c, "sam", "Wrong1234").status, 401);
    }
    let r = sign_in(&c, "sam", "Welcome123");
    assert_eq!(r.status, 429, "{}", r.text);
    let wait: i64 = r.header("retry-after").unwrap().parse().unwrap();
    assert!(wait > 0 && wait <= 15 * 60, "{wait}");
    assert!(
        r.body["message"].is_string() && r.body["request_id"].is_string(),
        "{}",
        r.text
    );
    advance(&t, 15 * 60 + 1);
    sign_in(&c, "sam", "Welcome123").expect(201);
    // One address failing over and over (any names) is held off too.
    let mut limited = None;
    for i in 0..25 {
        let r = sign_in(&c, &format!("nobody{i}"), "Wrong1234");
        if r.status == 429 {
            limited = Some(i);
            break;
        }
        assert_eq!(r.status, 401, "{}", r.text);
    }
    assert!(limited.is_some(), "the address was never limited");
    assert_eq!(sign_in(&c, "sam", "Welcome123").status, 429);
}
