//! The binary's contract: commands and their help, migrate, bootstrap,
//! and request ids in the logs.

use crate::engine_tests;
use crate::support::{TestApp, BIN};
use std::process::Command;

engine_tests!(
    request_ids_reach_the_log,
    migrate_is_idempotent,
    bootstrap_gives_separate_tenants
);

#[test]
fn every_command_has_help() {
    for args in [
        vec!["--help"],
        vec!["serve", "--help"],
        vec!["migrate", "--help"],
        vec!["bootstrap", "--help"],
    ] {
        let out = Command::new(BIN).args(&args).output().expect("run ferrogate");
        assert!(out.status.success(), "{args:?}");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("Usage:"), "{args:?}: {text}");
    }
    let serve = Command::new(BIN).args(["serve", "--help"]).output().unwrap();
    let text = String::from_utf8_lossy(&serve.stdout);
    for flag in [
        "--database-url",
        "--listen",
        "--public-url",
        "--data-key",
        "--smtp-url",
    ] {
        assert!(text.contains(flag), "serve --help names {flag}");
    }
    for var in [
        "FERROGATE_DATABASE_URL",
        "FERROGATE_LISTEN",
        "FERROGATE_PUBLIC_URL",
        "FERROGATE_DATA_KEY",
    ] {
        assert!(text.contains(var), "serve --help names {var}");
    }
}

fn request_ids_reach_the_log(app: &TestApp) {
    let t = app.bootstrap();
    let r = t.get("/v2/contacts/doesnotexist0000000000000000");
    assert_eq!(r.status, 404);
    let id = r.header("x-request-id").expect("x-request-id header").to_string();
    assert_eq!(r.body["request_id"], id.as_str());
    // The log line is written as the response leaves; give it a moment.
    let mut found = false;
    for _ in 0..50 {
        if app
            .log()
            .lines()
            .any(|l| l.contains(&id) && l.contains("request finished"))
        {
            found = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(found, "the request's log line carries its id");
    assert!(
        !app.log().contains(&t.cred("user_api_key")),
        "credentials never reach the log"
    );
}

fn migrate_is_idempotent(app: &TestApp) {
    for _ in 0..2 {
        let out = Command::new(BIN)
            .arg("migrate")
            .env("FERROGATE_DATABASE_URL", &app.database_url)
            .env("FERROGATE_DATA_KEY", &app.data_key)
            .output()
            .expect("run migrate");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    // The running server is unaffected.
    app.bootstrap().get("/v2/contacts").expect(200);
}

fn bootstrap_gives_separate_tenants(app: &TestApp) {
    let a = app.bootstrap();
    let b = app.bootstrap();
    for key in [
        "developer_id",
        "user_id",
        "user_api_key",
        "user_hash_key",
        "location_id",
    ] {
        assert_ne!(a.cred(key), b.cred(key), "{key} differs per tenant");
    }
    for t in [&a, &b] {
        let info = t.get("/v2/locationinfos").expect(200);
        let products = info.body["locationinfos"][0]["product_transactions"]
            .as_array()
            .unwrap()
            .clone();
        let ids: Vec<&str> = products.iter().map(|p| p["id"].as_str().unwrap()).collect();
        assert!(ids.contains(&t.cred("cc_product_transaction_id").as_str()));
        assert!(ids.contains(&t.cred("ach_product_transaction_id").as_str()));
        let me = t.get("/v2/users/me").expect(200);
        assert_eq!(me.body["user"]["primary_location_id"], t.location_id().as_str());
    }
}
