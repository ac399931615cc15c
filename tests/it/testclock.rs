//! Sandbox test clocks: a location's time moved forward on demand, for
//! its requests, its records and the background work that comes due.

use crate::engine_tests;
use crate::support::{str_of, Tenant, TestApp, BIN};
use serde_json::{json, Value};
use std::process::Command;

engine_tests!(
    a_clock_moves_a_location_forward,
    clock_requests_are_checked,
    the_command_line_twin,
);

fn clock(t: &Tenant) -> Value {
    t.get("/v2/developer/testclock").expect(200).body["testclock"].clone()
}

fn advance(t: &Tenant, body: Value) -> crate::support::Resp {
    t.post("/v2/developer/testclock/advance", json!({ "testclock": body }))
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

fn a_clock_moves_a_location_forward(app: &TestApp) {
    let t = app.bootstrap();
    let other = app.bootstrap();
    let c = clock(&t);
    assert_eq!(c["location_id"], t.location_id().as_str());
    assert_eq!(c["offset_seconds"], 0);
    assert!((c["now"].as_i64().unwrap() - now()).abs() <= 5, "{c}");

    let before = t.contact(json!({ "last_name": "Before" }));
    let three_days = 3 * 86_400;
    let r = advance(&t, json!({ "seconds": three_days })).expect(200);
    let moved = &r.body["testclock"];
    assert_eq!(moved["offset_seconds"], three_days);
    assert!(
        (moved["now"].as_i64().unwrap() - (now() + three_days)).abs() <= 5,
        "{moved}"
    );
    assert_eq!(moved["ran"]["postback_attempts"], 0);
    // Moves add up.
    let r = advance(&t, json!({ "seconds": 60, "location_id": t.location_id() })).expect(200);
    assert_eq!(r.body["testclock"]["offset_seconds"], three_days + 60);

    // What the location writes now carries its time.
    let after = t.contact(json!({ "last_name": "After" }));
    let created = after["created_ts"].as_i64().unwrap();
    assert!((created - (now() + three_days + 60)).abs() <= 5, "{after}");
    let sale = t
        .post(
            "/v2/transactions",
            json!({ "transaction": { "action": "sale", "payment_method": "cc", "transaction_amount": "10.00",
                "account_number": "4111111111111111", "exp_date": "1240" } }),
        )
        .expect(201)
        .body["transaction"]
        .clone();
    assert!(
        (sale["created_ts"].as_i64().unwrap() - created).abs() <= 5,
        "{sale}"
    );
    // "today" is the location's today: three days after the first contact.
    let today = t.get("/v2/contacts?created_ts=today").expect(200);
    let ids: Vec<&str> = today.body["contacts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&str_of(&after["id"]).as_str()));
    assert!(!ids.contains(&str_of(&before["id"]).as_str()));
    let recent = t.get("/v2/contacts?created_ts=last%2030%20days").expect(200);
    assert_eq!(recent.body["meta"]["pagination"]["totalCount"], 2);

    // Another tenant keeps real time.
    assert_eq!(clock(&other)["offset_seconds"], 0);
    let theirs = other.contact(json!({}));
    assert!((theirs["created_ts"].as_i64().unwrap() - now()).abs() <= 5);
}

fn clock_requests_are_checked(app: &TestApp) {
    let t = app.bootstrap();
    let other = app.bootstrap();
    for (body, field) in [
        (json!({ "seconds": -1 }), "seconds"),
        (json!({ "seconds": 11 * 366 * 86_400_i64 }), "seconds"),
        (json!({ "seconds": "soon" }), "seconds"),
        (json!({}), "seconds"),
        (json!({ "seconds": 1, "speed": 2 }), "speed"),
        (json!({ "seconds": 1, "location_id": 7 }), "location_id"),
    ] {
        let r = advance(&t, body.clone()).expect(422);
        assert!(!r.errors(field).is_empty(), "{body}: {}", r.text);
    }
    // Another tenant's location is not there for this caller.
    advance(&t, json!({ "seconds": 60, "location_id": other.location_id() })).expect(404);
    t.get(&format!(
        "/v2/developer/testclock?location_id={}",
        other.location_id()
    ))
    .expect(404);
    assert_eq!(clock(&other)["offset_seconds"], 0);
    // Moving time needs the right to change the location.
    let (id, key) = t.user(&t.location_id(), Some("2"));
    let read_only = t.as_user(&id, &key);
    assert_eq!(clock(&read_only)["offset_seconds"], 0);
    advance(&read_only, json!({ "seconds": 60 })).expect(403);
    assert_eq!(clock(&t)["offset_seconds"], 0, "refusals change nothing");
}

fn the_command_line_twin(app: &TestApp) {
    let t = app.bootstrap();
    let run = |args: &[&str]| -> Value {
        let out = Command::new(BIN)
            .args(args)
            .env("FERROGATE_DATABASE_URL", &app.database_url)
            .env("FERROGATE_DATA_KEY", &app.data_key)
            .output()
            .expect("run ferrogate");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).expect("JSON")
    };
    let loc = t.location_id();
    let shown = run(&["testclock", "show", "--location-id", &loc]);
    assert_eq!(shown["offset_seconds"], 0);
    let moved = run(&[
        "testclock",
        "advance",
        "--location-id",
        &loc,
        "--seconds",
        "86400",
    ]);
    assert_eq!(moved["offset_seconds"], 86_400);
    // The running server sees it at once.
    assert_eq!(clock(&t)["offset_seconds"], 86_400);
    let out = Command::new(BIN)
        .args(["testclock", "advance", "--location-id", &loc, "--seconds=-5"])
        .env("FERROGATE_DATABASE_URL", &app.database_url)
        .env("FERROGATE_DATA_KEY", &app.data_key)
        .output()
        .expect("run ferrogate");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("Seconds"));
}
