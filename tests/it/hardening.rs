//! What a fuzzer and a hostile client found (the hardening issue), one
//! regression test per finding.

use crate::engine_tests;
use crate::support::TestApp;

engine_tests!(
    duplicate_keys_are_refused,
    one_grammar_for_amounts,
    a_location_keeps_an_administrator,
    removals_at_once_leave_an_administrator,
    filter_values_are_bounded,
    bodies_declared_otherwise_are_refused,
    slow_clients_are_cut_off,
    crowding_clients_are_refused,
    rate_limits_answer_429,
    errors_before_the_application_are_json,
    the_document_states_what_the_server_checks,
);

fn total(t: &crate::support::Tenant, list: &str) -> i64 {
    t.get(list).expect(200).body["meta"]["pagination"]["totalCount"]
        .as_i64()
        .unwrap()
}

/// A key given twice is a 400 naming it, at any depth; nothing is written
/// (the last value must never win: 1.00 then 999.00 charged 999.00).
fn duplicate_keys_are_refused(app: &TestApp) {
    let t = app.bootstrap();
    let sale = r#"{"transaction":{"action":"sale","payment_method":"cc","account_number":"4111111111111111",
        "exp_date":"1239","transaction_amount":"1.00","transaction_amount":"999.00"}}"#;
    let r = t.send("POST", "/v2/transactions", Some(sale));
    assert_eq!(r.status, 400, "{}", r.text);
    assert!(r.text.contains("transaction.transaction_amount"), "{}", r.text);
    assert!(r.body["request_id"].is_string());
    assert_eq!(total(&t, "/v2/transactions"), 0, "nothing charged");
    for body in [
        r#"{"contact":{"last_name":"A","last_name":"B"}}"#,
        r#"{"contact":{"last_name":"A"},"contact":{"last_name":"B"}}"#,
    ] {
        let r = t.send("POST", "/v2/contacts", Some(body));
        assert_eq!(r.status, 400, "{body}: {}", r.text);
        assert!(r.text.contains("more than once"), "{}", r.text);
    }
    assert_eq!(total(&t, "/v2/contacts"), 0);
    // The same key in two different objects is fine.
    let ok = r#"{"contact":{"last_name":"A","custom":{"last_name":"x"}}}"#;
    let r = t.send("POST", "/v2/contacts", Some(ok));
    assert_ne!(r.status, 400, "{}", r.text);
}

/// Amounts: digits, an optional point and at most two decimals, in
/// strings and JSON numbers alike; everything else a 422 on the field.
fn one_grammar_for_amounts(app: &TestApp) {
    let t = app.bootstrap();
    let sale = |amount: &str| {
        format!(
            r#"{{"transaction":{{"action":"sale","payment_method":"cc","account_number":"4111111111111111",
            "exp_date":"1239","transaction_amount":{amount}}}}}"#
        )
    };
    for bad in [
        r#"" 10.00""#,
        r#""10.00 ""#,
        r#""10.""#,
        r#"".5""#,
        r#""+10.00""#,
        r#""1e3""#,
        r#""10.500""#,
        r#""1,000.00""#,
        "1e2",
        "1.5e1",
        "1E2",
        "10.500",
        "-1",
        r#""-1.00""#,
    ] {
        let r = t.send("POST", "/v2/transactions", Some(&sale(bad)));
        assert_eq!(r.status, 422, "{bad}: {}", r.text);
        assert!(
            r.body["errors"]["transaction_amount"].is_array(),
            "{bad}: the error names the field: {}",
            r.text
        );
    }
    assert_eq!(
        total(&t, "/v2/transactions"),
        0,
        "no refused amount charged anything"
    );
    for (good, answered) in [
        ("10", "10.00"),
        ("10.5", "10.50"),
        (r#""10.50""#, "10.50"),
        (r#""0007.25""#, "7.25"),
    ] {
        let r = t.send("POST", "/v2/transactions", Some(&sale(good)));
        assert_eq!(r.status, 201, "{good}: {}", r.text);
        assert_eq!(r.body["transaction"]["transaction_amount"], answered, "{good}");
    }
}

/// An administrator cannot remove their own role, and no location loses
/// its last active administrator (by a role revoked, a user deleted or
/// disabled, even by an administrator of a parent location).
fn a_location_keeps_an_administrator(app: &TestApp) {
    use serde_json::json;
    let t = app.bootstrap();
    let me = t.user_id();
    let own = t.get(&format!("/v2/authroleusers?user_id={me}")).expect(200).body["authroleusers"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = t.delete(&format!("/v2/authroleusers/{own}")).expect(409);
    assert!(r.errors("id")[0].contains("your own role"), "{}", r.text);
    t.get("/v2/contacts").expect(200);

    // A branch with one administrator of its own.
    let branch = t.location(&t.location_id(), "Branch");
    let (admin, _) = t.user(&branch, Some("1"));
    let role = t
        .get(&format!("/v2/authroleusers?user_id={admin}"))
        .expect(200)
        .body["authroleusers"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = t.delete(&format!("/v2/authroleusers/{role}")).expect(409);
    assert!(r.errors("id")[0].contains("last administrator"), "{}", r.text);
    let r = t.delete(&format!("/v2/users/{admin}")).expect(409);
    assert!(r.errors("id")[0].contains("last administrator"), "{}", r.text);
    let r = t
        .put(&format!("/v2/users/{admin}"), json!({ "user": { "status": 0 } }))
        .expect(409);
    assert!(r.errors("status")[0].contains("last administrator"), "{}", r.text);
    t.get(&format!("/v2/authroleusers/{role}")).expect(200);
    // With a second administrator there, the first can go.
    let (second, _) = t.user(&branch, Some("1"));
    t.delete(&format!("/v2/authroleusers/{role}")).expect(204);
    t.put(&format!("/v2/users/{admin}"), json!({ "user": { "status": 0 } }))
        .expect(200);
    let r = t.delete(&format!("/v2/users/{second}")).expect(409);
    assert!(r.errors("id")[0].contains("last administrator"));
    // A user without an administrator role is not counted, nor protected.
    let (plain, _) = t.user(&branch, Some("132"));
    t.delete(&format!("/v2/users/{plain}")).expect(204);
}

/// Both administrators of a location removed at the same moment (deleted,
/// disabled or their role revoked, in any pairing): one removal goes
/// through, the other is refused (409), and the location keeps an active
/// administrator. On PostgreSQL each removal used to count the other
/// administrator as still there, and both went through.
fn removals_at_once_leave_an_administrator(app: &TestApp) {
    use crate::support::{Resp, Tenant};
    use serde_json::json;
    let t = app.bootstrap();
    let role_of = |user: &str| {
        t.get(&format!("/v2/authroleusers?user_id={user}"))
            .expect(200)
            .body["authroleusers"][0]["id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let remove = |t: &Tenant, how: &str, user: &str, role: &str| -> Resp {
        match how {
            "delete" => t.delete(&format!("/v2/users/{user}")),
            "disable" => t.put(&format!("/v2/users/{user}"), json!({ "user": { "status": 0 } })),
            _ => t.delete(&format!("/v2/authroleusers/{role}")),
        }
    };
    let pairings = [
        ("delete", "delete"),
        ("disable", "disable"),
        ("revoke", "revoke"),
        ("delete", "disable"),
        ("disable", "revoke"),
    ];
    for round in 0..3 {
        for (first, second) in pairings {
            let branch = t.location(&t.location_id(), &format!("Branch {round} {first} {second}"));
            let admins: Vec<(String, String)> = (0..2)
                .map(|_| {
                    let (user, _) = t.user(&branch, Some("1"));
                    let role = role_of(&user);
                    (user, role)
                })
                .collect();
            let barrier = std::sync::Barrier::new(2);
            let answers: Vec<Resp> = std::thread::scope(|s| {
                let runs: Vec<_> = [first, second]
                    .into_iter()
                    .zip(&admins)
                    .map(|(how, (user, role))| {
                        let (t, barrier) = (&t, &barrier);
                        s.spawn(move || {
                            barrier.wait();
                            remove(t, how, user, role)
                        })
                    })
                    .collect();
                runs.into_iter().map(|h| h.join().unwrap()).collect()
            });
            let mut statuses: Vec<u16> = answers.iter().map(|r| r.status).collect();
            statuses.sort();
            let texts: Vec<&str> = answers.iter().map(|r| r.text.as_str()).collect();
            assert!(
                matches!(statuses.as_slice(), [200 | 204, 409]),
                "round {round}, {first} and {second}: {statuses:?} {texts:?}"
            );
            let refused = answers.iter().find(|r| r.status == 409).unwrap();
            assert!(refused.text.contains("last administrator"), "{}", refused.text);
            let active_admins = admins
                .iter()
                .filter(|(user, _)| {
                    let u = t.get(&format!("/v2/users/{user}"));
                    u.status == 200
                        && u.body["user"]["status"] == 1
                        // Each holds the administrator role only.
                        && t.get(&format!("/v2/authroleusers?user_id={user}"))
                            .expect(200)
                            .body["meta"]["pagination"]["totalCount"]
                            == 1
                })
                .count();
            assert_eq!(active_admins, 1, "round {round}, {first} and {second}");
        }
    }
}

/// A thousand repeated filter values is a 422, not a database error;
/// up to the bound they work.
fn filter_values_are_bounded(app: &TestApp) {
    let t = app.bootstrap();
    t.contact(serde_json::json!({ "last_name": "a7" }));
    let many: Vec<String> = (0..1000).map(|i| format!("last_name=a{i}")).collect();
    let r = t.get(&format!("/v2/contacts?{}", many.join("&")));
    assert_eq!(r.status, 422, "{}", r.text);
    assert!(r.errors("filter")[0].contains("at most 200"), "{}", r.text);
    let comma: Vec<String> = (0..300).map(|i| format!("x{i}")).collect();
    let r = t.get(&format!("/v2/contacts?id={}", comma.join(",")));
    assert_eq!(r.status, 422, "{}", r.text);
    let within: Vec<String> = (0..200).map(|_| "last_name=a7".to_string()).collect();
    let r = t.get(&format!("/v2/contacts?{}", within.join("&"))).expect(200);
    assert_eq!(r.body["meta"]["pagination"]["totalCount"], 1);
}

/// A body declared as text or XML is a 415 with our JSON error, not read
/// as JSON; JSON with a charset or a `+json` type is read (a body with no
/// content type too: see the unit test of `is_json_type`).
fn bodies_declared_otherwise_are_refused(app: &TestApp) {
    let t = app.bootstrap();
    let body = format!(
        r#"{{"contact":{{"location_id":"{}","last_name":"Doe"}}}}"#,
        t.location_id()
    );
    let client = app.client();
    let creds = [
        ("developer-id", t.cred("developer_id")),
        ("user-id", t.cred("user_id")),
        ("user-api-key", t.cred("user_api_key")),
    ];
    let send = |content_type: Option<&str>| {
        let mut headers: Vec<(&str, &str)> = creds.iter().map(|(k, v)| (*k, v.as_str())).collect();
        if let Some(ct) = content_type {
            headers.push(("content-type", ct));
        }
        client.send("POST", "/v2/contacts", &headers, Some(&body))
    };
    for refused in [
        "text/plain",
        "application/xml",
        "application/x-www-form-urlencoded",
    ] {
        let r = send(Some(refused));
        assert_eq!(r.status, 415, "{refused}: {}", r.text);
        assert!(r.body["request_id"].is_string(), "{refused}: our JSON error");
    }
    assert_eq!(total(&t, "/v2/contacts"), 0);
    assert_eq!(send(Some("application/json; charset=utf-8")).status, 201);
    assert_eq!(send(Some("application/vnd.api+json")).status, 201);
    assert_eq!(total(&t, "/v2/contacts"), 2);
}

/// Restarts the server with `env` added, and bootstraps a tenant on it.
fn restarted_with(app: &mut TestApp, env: &[(&str, &str)]) -> crate::support::Tenant {
    for (name, value) in env {
        app.extra_env.push((name.to_string(), value.to_string()));
    }
    app.kill();
    app.spawn();
    app.bootstrap()
}

/// Reads what the server sends until it closes the connection (or `limit`).
fn read_until_closed(stream: &mut std::net::TcpStream, limit: std::time::Duration) -> Option<String> {
    use std::io::Read;
    stream.set_read_timeout(Some(limit)).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return Some(String::from_utf8_lossy(&got).to_string()),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                return Some(String::from_utf8_lossy(&got).to_string())
            }
            Err(_) => return None,
        }
    }
}

/// A client that never finishes its head, and one whose body never
/// arrives: each is cut off within the configured limits.
fn slow_clients_are_cut_off(app: &mut TestApp) {
    use std::io::Write;
    use std::net::TcpStream;
    use std::time::Duration;
    let t = restarted_with(
        app,
        &[
            ("FERROGATE_HEADER_TIMEOUT_MS", "400"),
            ("FERROGATE_BODY_TIMEOUT_MS", "400"),
        ],
    );
    let addr = app.base.trim_start_matches("http://").to_string();

    // Half a head, then silence: closed once the head time is up.
    let mut slow_head = TcpStream::connect(&addr).unwrap();
    slow_head
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        .unwrap();
    let closed = read_until_closed(&mut slow_head, Duration::from_secs(5));
    assert!(closed.is_some(), "a half-sent head keeps its connection");

    // A body promised and never delivered: 408 with our JSON error.
    let mut slow_body = TcpStream::connect(&addr).unwrap();
    let head = format!(
        "POST /v2/contacts HTTP/1.1\r\nHost: x\r\ndeveloper-id: {}\r\nuser-id: {}\r\nuser-api-key: {}\r\n\
         content-type: application/json\r\ncontent-length: 100\r\n\r\n{{\"contact\":",
        t.cred("developer_id"),
        t.cred("user_id"),
        t.cred("user_api_key")
    );
    slow_body.write_all(head.as_bytes()).unwrap();
    let answer = read_until_closed(&mut slow_body, Duration::from_secs(5)).expect("answered and closed");
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("\"request_id\""), "{answer}");
    assert_eq!(total(&t, "/v2/contacts"), 0, "the cut-off body wrote nothing");
}

/// A client that opens too many connections from one address: the one
/// past the limit is refused with our JSON 503, and everyone else is still
/// served. The head time stays long here, so the idle crowd is still open
/// when the last one arrives however slow the machine.
fn crowding_clients_are_refused(app: &mut TestApp) {
    use std::net::TcpStream;
    use std::time::Duration;
    let t = restarted_with(
        app,
        &[
            ("FERROGATE_HEADER_TIMEOUT_MS", "60000"),
            ("FERROGATE_MAX_CONNECTIONS_PER_ADDRESS", "6"),
        ],
    );
    let addr = app.base.trim_start_matches("http://").to_string();

    // Six idle connections from one address are the most it may hold
    // (the server counts them in the order it accepts them).
    let crowd: Vec<TcpStream> = (0..6).map(|_| TcpStream::connect(&addr).unwrap()).collect();
    let mut seventh = TcpStream::connect(&addr).unwrap();
    let refused = read_until_closed(&mut seventh, Duration::from_secs(5)).expect("refused and closed");
    assert!(refused.starts_with("HTTP/1.1 503"), "{refused}");
    assert!(refused.contains("Too many connections"), "{refused}");
    assert!(refused.contains("\"status\":503"), "{refused}");
    drop(crowd);
    crate::support::wait::wait_until("a connection is served again", Duration::from_secs(5), || {
        let r = app.client().send("GET", "/healthz", &[], None);
        (r.status == 200).then_some(())
    });
    t.get("/v2/contacts").expect(200);
}

/// Beyond the per-user limit a user gets 429 with Retry-After and our
/// JSON error while others go on; beyond the per-address limit everyone
/// from that address does, health probes excepted.
fn rate_limits_answer_429(app: &mut TestApp) {
    let a = restarted_with(
        app,
        &[
            ("FERROGATE_RATE_LIMIT_PER_USER", "5"),
            ("FERROGATE_RATE_LIMIT_PER_ADDRESS", "25"),
        ],
    );
    let b = app.bootstrap();
    // A burst of twice the rate, then 429. The bucket refills while the
    // requests go (5 a second), so a slow machine may pass a few more
    // than the burst, never more than the refill allows.
    let (passed, limited, elapsed) = until_limited(200, 200, || a.get("/v2/contacts"));
    assert!(passed >= 10, "the burst passes: {passed}");
    let allowed = 10 + (5.0 * elapsed.as_secs_f64()).ceil() as usize;
    assert!(
        passed <= allowed,
        "{passed} passed in {elapsed:?}; at most {allowed}"
    );
    assert_eq!(limited.status, 429, "{}", limited.text);
    assert!(limited.header("retry-after").unwrap().parse::<u64>().unwrap() >= 1);
    assert!(limited.body["request_id"].is_string());
    assert_eq!(limited.body["status"], 429);
    // Another user from the same address still goes on.
    assert_eq!(b.get("/v2/locations").status, 200, "another user goes on");
    // Beyond the address's own limit (25 a second, burst 50) every
    // request from it is refused, signed in or not.
    let anonymous = || app.client().send("GET", "/v2/contacts", &[], None);
    let (passed, limited, elapsed) = until_limited(2_000, 401, anonymous);
    let allowed = 50 + (25.0 * elapsed.as_secs_f64()).ceil() as usize;
    assert!(
        passed <= allowed,
        "{passed} passed in {elapsed:?}; at most {allowed}"
    );
    // What the two users spent (at most 10 + 5 a second, and 1) came
    // out of the same burst of 50.
    assert!(passed >= 20, "the address's burst passes: {passed}");
    assert_eq!(limited.status, 429, "{}", limited.text);
    // A user with tokens of its own (b has used 1 of its 10) is refused
    // with the address. A stalled moment may refill the address by a
    // token: spend it and ask again (b stays within its own burst).
    let refused = (0..8).any(|_| {
        let (_, drained, _) = until_limited(2_000, 401, anonymous);
        assert_eq!(drained.status, 429, "{}", drained.text);
        b.get("/v2/locations").status == 429
    });
    assert!(refused, "the address limit applies to a signed-in user too");
    assert_eq!(
        app.client().send("GET", "/healthz", &[], None).status,
        200,
        "probes are exempt"
    );
}

/// Sends `request` until it answers other than `passing` (at most `most`
/// times): how many passed before, that answer, and the time they took
/// from the first.
fn until_limited(
    most: usize,
    passing: u16,
    request: impl Fn() -> crate::support::Resp,
) -> (usize, crate::support::Resp, std::time::Duration) {
    let start = std::time::Instant::now();
    for passed in 0..most {
        let r = request();
        if r.status != passing {
            return (passed, r, start.elapsed());
        }
    }
    panic!("{most} requests in {:?} and none refused", start.elapsed());
}

/// What the HTTP library refuses before the application (a URI over
/// 64 KiB, too many headers, a NUL in the path) answers like every other
/// error: JSON with a request_id.
fn errors_before_the_application_are_json(app: &TestApp) {
    use std::io::Write;
    let addr = app.base.trim_start_matches("http://").to_string();
    let send = |raw: Vec<u8>| -> String {
        let mut s = std::net::TcpStream::connect(&addr).unwrap();
        s.write_all(&raw).unwrap();
        read_until_closed(&mut s, std::time::Duration::from_secs(5)).expect("answered and closed")
    };
    let mut long = b"GET /v2/contacts?".to_vec();
    long.extend(std::iter::repeat_n(b'a', 70_000));
    long.extend_from_slice(b" HTTP/1.1\r\nHost: x\r\n\r\n");
    let mut many = b"GET /v2/contacts HTTP/1.1\r\nHost: x\r\n".to_vec();
    for i in 0..150 {
        many.extend_from_slice(format!("X-H{i}: v\r\n").as_bytes());
    }
    many.extend_from_slice(b"\r\n");
    let nul = b"GET /v2/con\x00tacts HTTP/1.1\r\nHost: x\r\n\r\n".to_vec();
    for (raw, status) in [(long, 414), (many, 431), (nul, 400)] {
        let answer = send(raw);
        assert!(answer.starts_with(&format!("HTTP/1.1 {status} ")), "{answer}");
        assert!(answer.contains("content-type: application/json"), "{answer}");
        let body: serde_json::Value = serde_json::from_str(answer.split_once("\r\n\r\n").unwrap().1).unwrap();
        assert_eq!(body["status"], status);
        assert!(body["request_id"].is_string(), "{answer}");
    }
    // The server is none the worse.
    assert_eq!(app.client().send("GET", "/healthz", &[], None).status, 200);
}

/// The OpenAPI document and the server judge inputs alike: what the
/// document forbids (a value outside an enumeration, a boolean or `+3`
/// for an integer, an `api_id` other than 0 or 1, a date not in
/// yyyy-mm-dd) the server refuses, and the document lists the
/// enumerations, patterns and formats the server checks.
fn the_document_states_what_the_server_checks(app: &TestApp) {
    let t = app.bootstrap();
    let doc = t.get("/v2/openapi.json").expect(200).body;
    let schemas = &doc["components"]["schemas"];
    let create = |path: &str, key: &str| {
        doc["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]["properties"][key]
            ["properties"]
            .clone()
    };
    let enum_of = |schema: &serde_json::Value| -> Vec<String> {
        let one = |s: &serde_json::Value| s["enum"].as_array().cloned().unwrap_or_default();
        let mut values = one(schema);
        for form in schema["anyOf"].as_array().into_iter().flatten() {
            values.extend(one(form));
        }
        values
            .iter()
            .map(|v| v.as_str().map(str::to_string).unwrap_or(v.to_string()))
            .collect()
    };
    let tx = create("/v2/transactions", "transaction");
    assert_eq!(
        enum_of(&tx["action"]),
        ["sale", "authonly", "avsonly", "force", "refund", "debit", "credit"]
    );
    let put_action = &doc["paths"]["/v2/transactions/{id}"]["put"]["requestBody"]["content"]
        ["application/json"]["schema"]["properties"]["transaction"]["properties"]["action"];
    assert_eq!(
        enum_of(put_action),
        [
            "authcomplete",
            "authincrement",
            "void",
            "partialreversal",
            "tipadjust",
            "edit"
        ]
    );
    assert_eq!(enum_of(&tx["payment_method"]), ["cc", "ach"]);
    assert!(enum_of(&tx["ach_sec_code"]).contains(&"WEB".to_string()));
    let pb = create("/v2/postbackconfigs", "postbackconfig");
    assert_eq!(enum_of(&pb["format"]), ["api-default"]);
    assert!(enum_of(&pb["resource"]).contains(&"transaction".to_string()));
    let contact = create("/v2/contacts", "contact");
    let patterns: Vec<&str> = contact["email"]["anyOf"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["pattern"].as_str())
        .collect();
    assert!(patterns.iter().any(|p| p.contains('@')), "{patterns:?}");
    assert!(contact["date_of_birth"]
        .to_string()
        .contains("\"format\":\"date\""));
    assert!(schemas["TimeZone"]["enum"]
        .as_array()
        .unwrap()
        .contains(&serde_json::json!("America/New_York")));
    let idem = &doc["paths"]["/v2/transactions"]["post"]["parameters"][0]["schema"];
    assert_eq!(idem["maxLength"], 255);
    assert!(idem["pattern"].is_string());
    // Every operation has its own name, and a create links to its record.
    let mut names = std::collections::HashSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (verb, op) in item
            .as_object()
            .unwrap()
            .iter()
            .filter(|(v, _)| *v != "parameters")
        {
            let name = op["operationId"]
                .as_str()
                .unwrap_or_else(|| panic!("{verb} {path} has no operationId"));
            assert!(names.insert(name.to_string()), "{name} twice");
        }
    }
    assert_eq!(
        doc["paths"]["/v2/contacts"]["post"]["responses"]["201"]["links"]["read"]["operationId"],
        "contacts.read"
    );

    // What the document forbids, the server refuses.
    let contact = t.contact(serde_json::json!({ "contact_api_id": "crm-7" }));
    let id = contact["id"].as_str().unwrap();
    let r = t.get("/v2/contacts/crm-7?api_id=-108162825");
    assert_eq!(r.status, 422, "{}", r.text);
    assert!(r.body["errors"]["api_id"].is_array(), "{}", r.text);
    t.get("/v2/contacts/crm-7?api_id=1").expect(200);
    t.get(&format!("/v2/contacts/{id}?api_id=0")).expect(200);
    let loc = t.location_id();
    for (body, field) in [
        (
            serde_json::json!({ "location_id": loc, "last_name": "X", "date_of_birth": "+202-02-02" }),
            "date_of_birth",
        ),
        (
            serde_json::json!({ "location_id": loc, "last_name": "X", "date_of_birth": "0000-01-01" }),
            "date_of_birth",
        ),
    ] {
        let r = t.post("/v2/contacts", serde_json::json!({ "contact": body }));
        assert_eq!(r.status, 422, "{}", r.text);
        assert!(r.body["errors"][field].is_array(), "{}", r.text);
    }
    let sale = |extra: serde_json::Value| {
        let mut tx = serde_json::json!({ "action": "sale", "payment_method": "cc",
            "account_number": "4111111111111111", "exp_date": "1239", "transaction_amount": "1.00" });
        for (k, v) in extra.as_object().unwrap() {
            tx[k] = v.clone();
        }
        t.post("/v2/transactions", serde_json::json!({ "transaction": tx }))
    };
    for (extra, field) in [
        (serde_json::json!({ "action": "SALE" }), "action"),
        (serde_json::json!({ "action": " sale" }), "action"),
        (serde_json::json!({ "payment_method": "CC" }), "payment_method"),
    ] {
        let r = sale(extra.clone());
        assert_eq!(r.status, 422, "{extra}: {}", r.text);
        assert!(r.body["errors"][field].is_array(), "{extra}: {}", r.text);
    }
    for bad in [
        serde_json::json!(true),
        serde_json::json!("+3"),
        serde_json::json!(" 3"),
    ] {
        let r = t.post(
            "/v2/postbackconfigs",
            serde_json::json!({ "postbackconfig": { "location_id": loc, "resource": "contact",
                "url": "https://example.com/hook", "number_of_attempts": bad } }),
        );
        assert_eq!(r.status, 422, "{bad}: {}", r.text);
        assert!(
            r.body["errors"]["number_of_attempts"].is_array(),
            "{bad}: {}",
            r.text
        );
    }
    assert_eq!(total(&t, "/v2/transactions"), 0, "nothing refused was charged");
    assert_eq!(total(&t, "/v2/postbackconfigs"), 0);
    // The sale the document describes goes through.
    let r = sale(serde_json::json!({}));
    assert_eq!(r.status, 201, "{}", r.text);
}
