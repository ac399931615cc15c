//! Users with passwords and the token method of authentication: sign in,
//! a one-time password, changing one's own, idle expiry on the test clock,
//! signing out, and the limits on failed sign-ins.

use crate::engine_tests;
use crate::support::db::{db, Db};
use crate::support::{Client, Resp, Tenant, TestApp};
use serde_json::{json, Value};

engine_tests!(
    passwords_and_session_tokens,
    failed_sign_ins_are_limited,
    the_lock_does_not_tell_which_names_exist,
    the_lock_passes_and_an_administrator_lifts_it,
    old_password_guesses_count_toward_the_lock,
    expired_sessions_sign_out_as_none_and_are_swept,
    the_token_method_needs_a_developer_id,
    sign_in_format_errors_are_named,
    guesses_sent_at_once_are_counted_one_by_one,
    sign_ins_leave_the_epoch_alone,
    every_user_column_but_sign_in_bookkeeping_moves_the_epoch,
);

/// A client of the token method: it sends the developer-id, as on every
/// request, and nothing else unless told.
struct Dev {
    c: Client,
    id: String,
}

impl Dev {
    fn send(&self, method: &str, path: &str, headers: &[(&str, &str)], body: Option<&str>) -> Resp {
        let mut all = vec![("developer-id", self.id.as_str())];
        all.extend_from_slice(headers);
        self.c.send(method, path, &all, body)
    }
}

fn dev(app: &TestApp, t: &Tenant) -> Dev {
    Dev {
        c: app.client(),
        id: t.cred("developer_id"),
    }
}

fn sign_in(c: &Dev, username: &str, password: &str) -> Resp {
    let body = json!({ "username": username, "password": password, "domain": "pay.example.com" });
    c.send("POST", "/v2/token", &[], Some(&body.to_string()))
}

fn with_token(c: &Dev, method: &str, path: &str, token: &str, body: Option<Value>) -> Resp {
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
    let c = dev(app, &t);
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
    let c = dev(app, &t);
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

fn retry_after(r: &Resp) -> i64 {
    r.header("retry-after").unwrap().parse().unwrap()
}

fn the_lock_does_not_tell_which_names_exist(app: &TestApp) {
    let t = app.bootstrap();
    let c = dev(app, &t);
    let (disabled, _) = reader(&t, "dora", "Welcome123");
    t.put(
        &format!("/v2/users/{disabled}"),
        json!({ "user": { "status": 0 } }),
    )
    .expect(200);
    reader(&t, "bob", "Welcome123");
    // An existing name, a name nobody has and a disabled user: the same
    // five 401s, then the same 429 with the same wait.
    let mut waits = Vec::new();
    for name in ["bob", "ghost", "dora"] {
        for _ in 0..5 {
            let r = sign_in(&c, name, "Wrong1234");
            assert_eq!(r.status, 401, "{name}: {}", r.text);
            assert_eq!(r.body["message"], "Invalid username or password.", "{name}");
        }
        let r = sign_in(&c, name, "Wrong1234");
        assert_eq!(r.status, 429, "{name}: {}", r.text);
        waits.push(retry_after(&r));
    }
    for wait in &waits {
        assert!((15 * 60 - 5..=15 * 60).contains(wait), "{waits:?}");
    }
    // Even the right password waits, for the name that exists.
    assert_eq!(sign_in(&c, "bob", "Welcome123").status, 429);
    // Names are found case-sensitively, so they are counted so (another
    // case is another name, with a count of its own), and never kept in
    // clear.
    assert_eq!(sign_in(&c, "GHOST", "Wrong1234").status, 401);
    assert_eq!(sign_in(&c, "BOB", "Welcome123").status, 401);
    let mut conn = db(app);
    assert!(conn.columns_containing("ghost").is_empty());
    assert!(conn.columns_containing("GHOST").is_empty());
    assert_eq!(conn.count("SELECT COUNT(*) FROM sign_in_failures", &[]), 5);
}

fn the_lock_passes_and_an_administrator_lifts_it(app: &TestApp) {
    let t = app.bootstrap();
    let c = dev(app, &t);
    let (id, _) = reader(&t, "sam", "Welcome123");
    let own = format!("/v2/users/{id}");
    let lock = |c: &Dev| {
        for _ in 0..5 {
            assert_eq!(sign_in(c, "sam", "Wrong1234").status, 401);
        }
        assert_eq!(sign_in(c, "sam", "Wrong1234").status, 429);
    };
    lock(&c);
    assert_eq!(t.get(&own).expect(200).body["user"]["login_attempts"], 5);
    // Once the lock has passed, the count starts again: one more wrong
    // password does not lock the user again.
    advance(&t, 15 * 60 + 1);
    assert_eq!(sign_in(&c, "sam", "Wrong1234").status, 401);
    assert_eq!(t.get(&own).expect(200).body["user"]["login_attempts"], 1);
    sign_in(&c, "sam", "Welcome123").expect(201);
    assert_eq!(t.get(&own).expect(200).body["user"]["login_attempts"], 0);

    // An administrator's password reset unlocks.
    lock(&c);
    let r = t.put(&own, json!({ "user": { "password": "Reset2024x" } }));
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["user"]["login_attempts"], 0);
    sign_in(&c, "sam", "Reset2024x").expect(201);

    // So does enabling the user again.
    lock(&c);
    t.put(&own, json!({ "user": { "status": 0 } })).expect(200);
    assert_eq!(sign_in(&c, "sam", "Reset2024x").status, 429, "still locked");
    let r = t.put(&own, json!({ "user": { "status": 1 } }));
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["user"]["login_attempts"], 0);
    sign_in(&c, "sam", "Reset2024x").expect(201);
}

fn old_password_guesses_count_toward_the_lock(app: &TestApp) {
    let t = app.bootstrap();
    let c = dev(app, &t);
    let own = format!("/v2/users/{}", t.user_id());
    let username = t.get("/v2/users/me").expect(200).body["user"]["username"]
        .as_str()
        .unwrap()
        .to_string();
    // The admin (an API key) sets its own first password: none to check.
    t.put(&own, json!({ "user": { "password": "AdminPass111" } }))
        .expect(200);
    let guess = |i: usize| {
        t.put(
            &own,
            json!({ "user": { "password": "AdminPass222", "old_password": format!("Guess{i}xx1") } }),
        )
    };
    for i in 0..5 {
        let r = guess(i);
        assert_eq!(r.status, 422, "{}", r.text);
        assert!(!r.errors("old_password").is_empty(), "{}", r.text);
    }
    assert_eq!(
        t.get("/v2/users/me").expect(200).body["user"]["login_attempts"],
        5,
        "each wrong guess counts"
    );
    // Locked now: the right password is refused too, here and at sign-in.
    let right = json!({ "user": { "password": "AdminPass222", "old_password": "AdminPass111" } });
    let r = t.put(&own, right.clone());
    assert_eq!(r.status, 429, "{}", r.text);
    assert!(retry_after(&r) > 0);
    assert_eq!(guess(9).status, 429);
    assert_eq!(sign_in(&c, &username, "AdminPass111").status, 429);
    advance(&t, 15 * 60 + 1);
    let r = t.put(&own, right);
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["user"]["login_attempts"], 0);
    sign_in(&c, &username, "AdminPass222").expect(201);
    assert!(!app.log().contains("AdminPass"), "no password in the log");
}

fn expired_sessions_sign_out_as_none_and_are_swept(app: &TestApp) {
    let t = app.bootstrap();
    let c = dev(app, &t);
    let (id, _) = reader(&t, "eve", "Welcome123");
    let token = |c: &Dev| {
        sign_in(c, "eve", "Welcome123").expect(201).body["token"]["token"]
            .as_str()
            .unwrap()
            .to_string()
    };
    // A session past its 15 idle minutes signs out as none: 404.
    let expired = token(&c);
    let mut conn = db(app);
    conn.exec(
        "UPDATE user_sessions SET expires_ts = expires_ts - 1000 WHERE user_id = ?",
        &[id.as_str()],
    );
    assert_eq!(with_token(&c, "GET", "/v2/users/me", &expired, None).status, 401);
    let r = c.send("DELETE", &format!("/v2/token/{expired}"), &[], None);
    assert_eq!(r.status, 404, "{}", r.text);
    // Sessions left to expire are swept (the test clock's move sweeps at
    // once; a background sweep does every minute).
    let idle = token(&c);
    let live = |conn: &mut crate::support::db::Db| {
        conn.count(
            "SELECT COUNT(*) FROM user_sessions WHERE user_id = ?",
            &[id.as_str()],
        )
    };
    assert_eq!(live(&mut conn), 1);
    advance(&t, 15 * 60 + 1);
    assert_eq!(live(&mut conn), 0, "the expired session is gone");
    assert_eq!(
        c.send("DELETE", &format!("/v2/token/{idle}"), &[], None).status,
        404
    );
    // A token sent to a mistyped path is not logged either.
    let live_token = token(&c);
    for path in [
        format!("/v2/token/{live_token}/x"),
        format!("/V2/token/{live_token}"),
        format!("/v2/token/{live_token}/"),
    ] {
        let r = c.send("DELETE", &path, &[], None);
        assert!([204, 404, 405].contains(&r.status), "{path}: {}", r.status);
    }
    let log = app.log();
    for secret in [&expired, &idle, &live_token] {
        assert!(!log.contains(secret.as_str()), "a token is in the log");
    }
    assert!(
        log.contains("/v2/token/{secret}"),
        "the mistyped paths are logged redacted"
    );
}

fn the_token_method_needs_a_developer_id(app: &TestApp) {
    let t = app.bootstrap();
    let c = dev(app, &t);
    let (nina, _) = reader(&t, "nina", "Welcome123");
    let body =
        json!({ "username": "nina", "password": "Welcome123", "domain": "pay.example.com" }).to_string();
    let bare = app.client();
    for headers in [
        vec![],
        vec![("developer-id", "not-a-developer")],
        vec![("developer-id", "000000000000000000000000")],
    ] {
        let r = bare.send("POST", "/v2/token", &headers, Some(&body));
        assert_eq!(r.status, 401, "{headers:?}: {}", r.text);
        assert!(r.text.contains("developer-id"), "{}", r.text);
    }
    assert_eq!(
        t.get(&format!("/v2/users/{nina}")).expect(200).body["user"]["login_attempts"],
        0,
        "no password was checked"
    );
    // In the query string as well as a header.
    let query = format!("/v2/token?developer-id={}", t.cred("developer_id"));
    bare.send("POST", &query, &[], Some(&body)).expect(201);
    let token = sign_in(&c, "nina", "Welcome123").expect(201).body["token"]["token"]
        .as_str()
        .unwrap()
        .to_string();
    with_token(&c, "GET", "/v2/users/me", &token, None).expect(200);
    let r = bare.send("GET", "/v2/users/me", &[("access-token", &token)], None);
    assert_eq!(r.status, 401, "{}", r.text);
    assert!(r.text.contains("developer-id"), "{}", r.text);
    let r = bare.send(
        "GET",
        "/v2/users/me",
        &[
            ("access-token", &token),
            ("developer-id", "000000000000000000000000"),
        ],
        None,
    );
    assert_eq!(r.status, 401, "{}", r.text);
    let r = bare.send(
        "GET",
        &format!("/v2/users/me?developer-id={}", t.cred("developer_id")),
        &[("access-token", &token)],
        None,
    );
    assert_eq!(r.status, 200, "{}", r.text);
    // Signing out needs only the token: it must always be possible.
    bare.send("DELETE", &format!("/v2/token/{token}"), &[], None)
        .expect(204);
}

fn sign_in_format_errors_are_named(app: &TestApp) {
    let t = app.bootstrap();
    let c = dev(app, &t);
    reader(&t, "otto", "Welcome123");
    let long = "Aa1".repeat(100);
    for (password, message) in [
        (json!(long), "Password must have at most 256 characters."),
        (json!(12345678), "Password must be a string."),
        (json!(["Welcome123"]), "Password must be a string."),
        (json!(""), "Password cannot be blank."),
        (Value::Null, "Password cannot be blank."),
    ] {
        let body = json!({ "username": "otto", "password": password, "domain": "pay.example.com" });
        let r = c.send("POST", "/v2/token", &[], Some(&body.to_string()));
        assert_eq!(r.status, 422, "{}", r.text);
        assert_eq!(r.errors("password"), vec![message.to_string()], "{}", r.text);
        assert!(!r.text.contains(&long));
    }
    let body = json!({ "username": 42, "password": "Welcome123", "domain": "pay.example.com" });
    let r = c.send("POST", "/v2/token", &[], Some(&body.to_string()));
    assert_eq!(
        r.errors("username"),
        vec!["Username must be a string.".to_string()]
    );
    // Format errors check no password: nothing was counted.
    sign_in(&c, "otto", "Welcome123").expect(201);
}

/// Guesses sent at once are counted before any password is checked: of
/// twelve wrong passwords for one name in flight together, five are
/// checked (and lock the name) and the rest are refused unchecked; the
/// right password then waits like any other.
fn guesses_sent_at_once_are_counted_one_by_one(app: &TestApp) {
    let t = app.bootstrap();
    reader(&t, "racer", "Welcome123");
    let (base, id) = (app.base.clone(), t.cred("developer_id"));
    let guesses: Vec<_> = (0..12)
        .map(|_| {
            let c = Dev {
                c: Client { base: base.clone() },
                id: id.clone(),
            };
            std::thread::spawn(move || sign_in(&c, "racer", "Wrong1234").status)
        })
        .collect();
    let mut statuses: Vec<u16> = guesses.into_iter().map(|g| g.join().unwrap()).collect();
    statuses.sort();
    assert_eq!(statuses, [vec![401; 5], vec![429; 7]].concat());
    assert_eq!(sign_in(&dev(app, &t), "racer", "Welcome123").status, 429);
}

fn epoch(app: &TestApp) -> i64 {
    db(app).count("SELECT n FROM auth_epoch WHERE id = 1", &[])
}

/// A sign-in, right or wrong, writes only its bookkeeping onto the user,
/// which nothing kept under `auth_epoch` reads: the epoch stays, so no
/// node drops its kept callers and configuration (ADR 0021, 0024) and
/// none queues on the epoch row. (Every sign-in moved it, even a wrong
/// password for a known name.) A change of the user still moves it.
fn sign_ins_leave_the_epoch_alone(app: &TestApp) {
    let t = app.bootstrap();
    let c = dev(app, &t);
    let (id, _) = reader(&t, "sam", "Welcome123");
    let before = epoch(app);
    assert_eq!(sign_in(&c, "sam", "Wrong1234").status, 401);
    assert_eq!(
        db(app).count("SELECT login_attempts FROM users WHERE id = ?", &[&id]),
        1,
        "the failure is shown on the user"
    );
    sign_in(&c, "sam", "Welcome123").expect(201);
    sign_in(&c, "sam", "Welcome123").expect(201);
    let mut conn = db(app);
    assert_eq!(
        conn.count(
            "SELECT COUNT(*) FROM users WHERE id = ? AND login_attempts = 0 AND last_login_ts IS NOT NULL \
             AND current_login_ts IS NOT NULL AND current_login_ip IS NOT NULL",
            &[&id]
        ),
        1,
        "the sign-ins are recorded on the user"
    );
    assert_eq!(epoch(app), before, "sign-ins moved auth_epoch");
    t.put(
        &format!("/v2/users/{id}"),
        json!({ "user": { "email": "sam@example.com" } }),
    )
    .expect(200);
    assert!(epoch(app) > before, "a change of the user must move auth_epoch");
}

/// The user's sign-in bookkeeping, which does not move the epoch.
const SIGN_IN_BOOKKEEPING: [&str; 5] = [
    "last_login_ts",
    "current_login_ts",
    "current_login_ip",
    "login_attempts",
    "login_locked_until",
];

/// Migration 38 lists the columns of `users` whose update moves the
/// epoch: every one but the sign-in bookkeeping. A column added later
/// must join the list (or the bookkeeping, if nothing kept reads it), or
/// a change to it would not reach the callers nodes keep.
fn every_user_column_but_sign_in_bookkeeping_moves_the_epoch(app: &TestApp) {
    let mut conn = db(app);
    let (columns, trigger) = match &mut conn {
        Db::Sqlite(c) => {
            let columns: Vec<String> = c
                .prepare("SELECT name FROM pragma_table_info('users')")
                .unwrap()
                .query_map([], |r| r.get(0))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            let trigger: String = c
                .query_row(
                    "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = 'auth_epoch_users_update'",
                    [],
                    |r| r.get(0),
                )
                .unwrap();
            (columns, trigger)
        }
        Db::Postgres(c) => {
            let columns = c
                .query(
                    "SELECT column_name::text FROM information_schema.columns \
                     WHERE table_schema = current_schema() AND table_name = 'users'",
                    &[],
                )
                .unwrap()
                .iter()
                .map(|r| r.get(0))
                .collect();
            let trigger = c
                .query_one(
                    "SELECT pg_get_triggerdef(oid) FROM pg_trigger WHERE tgname = 'auth_changed_users_update'",
                    &[],
                )
                .unwrap()
                .get(0);
            (columns, trigger)
        }
    };
    let listed: std::collections::BTreeSet<String> = trigger
        .split_once("UPDATE OF")
        .and_then(|(_, rest)| rest.split_once(" ON "))
        .unwrap_or_else(|| panic!("no column list in {trigger}"))
        .0
        .split(',')
        .map(|c| c.trim().to_string())
        .collect();
    let expected: std::collections::BTreeSet<String> = columns
        .into_iter()
        .filter(|c| !SIGN_IN_BOOKKEEPING.contains(&c.as_str()))
        .collect();
    assert_eq!(listed, expected, "{trigger}");
}
