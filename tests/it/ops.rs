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

/// Acknowledged writes survive a SIGKILL of the server (no graceful
/// shutdown, the SQLite writer thread dies mid-flight).
mod durability {
    use crate::support::{Engine, TestApp};
    use serde_json::json;

    fn run(engine: Engine) {
        let Some(mut app) = TestApp::start(engine) else {
            eprintln!("skipped: FERROGATE_TEST_DATABASE_URL is not set");
            return;
        };
        let t = app.bootstrap();
        // Concurrent creates share group commits; each 201 must be durable.
        let ids: Vec<String> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|w| {
                    let t = t.clone();
                    s.spawn(move || {
                        (0..25)
                            .map(|i| {
                                t.contact(json!({ "last_name": format!("Durable{w}-{i}") }))["id"]
                                    .as_str()
                                    .unwrap()
                                    .to_string()
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
        });
        app.kill();
        app.spawn();
        let t = crate::support::Tenant {
            base: app.base.clone(),
            creds: t.creds.clone(),
        };
        let r = t.get("/v2/contacts?last_name=Durable&page_size=100").expect(200);
        assert_eq!(r.body["meta"]["pagination"]["totalCount"], 200);
        for id in ids.iter().step_by(7) {
            t.get(&format!("/v2/contacts/{id}")).expect(200);
        }
    }

    #[test]
    fn sqlite() {
        run(Engine::Sqlite);
    }

    #[test]
    fn postgres() {
        run(Engine::Postgres);
    }
}

/// The embedded database is configured for durability: WAL journal and
/// foreign keys (checked on the file itself).
#[test]
fn sqlite_file_uses_wal_and_foreign_keys() {
    let app = TestApp::start(crate::support::Engine::Sqlite).unwrap();
    let t = app.bootstrap();
    let path = app.database_url.strip_prefix("sqlite://").unwrap();
    let conn = rusqlite::Connection::open(path).unwrap();
    let mode: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
    assert_eq!(mode, "wal");
    // A contact naming a location that does not exist cannot be stored.
    conn.pragma_update(None, "foreign_keys", "ON").unwrap();
    let orphan = conn.execute(
        "INSERT INTO contacts (id, location_id, last_name, created_ts, modified_ts) VALUES ('x', 'nowhere', 'x', 0, 0)",
        [],
    );
    assert!(orphan.is_err());
    drop(t);
}
