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
        vec!["bins", "--help"],
        vec!["bins", "import", "--help"],
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
        let out = app.cli(&["migrate"]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    // The running server is unaffected.
    app.bootstrap().get("/v2/contacts").expect(200);

    // A schema a newer build moved on stops an older build's migrate
    // (and so its serve), naming the migration; nothing is applied.
    crate::support::db::db(app).exec(
        "INSERT INTO schema_migrations (version, name, applied_ts) VALUES (9999, 'from_a_newer_build', 0)",
        &[],
    );
    let out = app.cli(&["migrate"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("migration 9999") && err.contains("newer build"),
        "{err}"
    );
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
            crate::support::no_postgres();
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

/// PostgreSQL sessions die (a restart, a failover, an operator): the
/// server answers 503 while its connections are gone and recovers by
/// itself; it never hangs or answers 500.
#[test]
fn postgres_outage_is_survived() {
    let Some(app) = TestApp::start(crate::support::Engine::Postgres) else {
        crate::support::no_postgres();
        return;
    };
    let t = app.bootstrap();
    t.contact(serde_json::json!({}));
    let admin = std::env::var("FERROGATE_TEST_DATABASE_URL").unwrap();
    let db_name = app.database_url.rsplit('/').next().unwrap().to_string();
    let mut client = postgres::Client::connect(&admin, postgres::NoTls).unwrap();
    for round in 0..3 {
        let killed = client
            .execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
                &[&db_name],
            )
            .unwrap();
        assert!(killed > 0, "round {round}: the server had sessions");
        let mut ok = false;
        for _ in 0..20 {
            let r = t.get("/v2/contacts");
            match r.status {
                200 => {
                    ok = true;
                    break;
                }
                503 => assert!(r.body["message"].is_string(), "{}", r.text),
                other => panic!("round {round}: unexpected {other}: {}", r.text),
            }
        }
        assert!(ok, "round {round}: the server recovered");
        assert_eq!(app.client().send("GET", "/readyz", &[], None).status, 200);
    }
    // Writes work again too.
    t.contact(serde_json::json!({ "last_name": "After" }));
}

/// SIGTERM while a request is half sent: the server finishes it (201)
/// before it exits, and exits cleanly.
mod in_flight_shutdown {
    use crate::support::{Engine, TestApp};
    use std::io::{Read, Write};

    fn run(engine: Engine) {
        let Some(mut app) = TestApp::start(engine) else {
            crate::support::no_postgres();
            return;
        };
        let t = app.bootstrap();
        let body =
            serde_json::json!({ "contact": { "location_id": t.location_id(), "last_name": "InFlight" } })
                .to_string();
        let addr = app.base.strip_prefix("http://").unwrap().to_string();
        let mut stream = std::net::TcpStream::connect(&addr).unwrap();
        // `expect: 100-continue`: the server's "100 Continue" shows that
        // the request is in the handler, reading its body, however slow
        // the machine.
        let head = format!(
            "POST /v2/contacts HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
             developer-id: {}\r\nuser-id: {}\r\nuser-api-key: {}\r\ncontent-length: {}\r\n\
             expect: 100-continue\r\nconnection: close\r\n\r\n",
            t.cred("developer_id"),
            t.cred("user_id"),
            t.cred("user_api_key"),
            body.len()
        );
        stream.write_all(head.as_bytes()).unwrap();
        let continued = "HTTP/1.1 100 Continue\r\n\r\n";
        let mut interim = vec![0u8; continued.len()];
        stream.read_exact(&mut interim).unwrap();
        assert_eq!(String::from_utf8_lossy(&interim), continued);
        stream.write_all(&body.as_bytes()[..10]).unwrap();
        // The signal arrives while the body is still coming.
        let log = app.dir.join("server.log");
        let stopper = std::thread::spawn(move || {
            let status = app.stop();
            (app, status)
        });
        crate::support::wait::wait_until(
            "the server to take the signal",
            std::time::Duration::from_secs(30),
            || {
                std::fs::read_to_string(&log)
                    .unwrap_or_default()
                    .contains("shutdown signal received")
                    .then_some(())
            },
        );
        stream.write_all(&body.as_bytes()[10..]).unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        assert!(answer.starts_with("HTTP/1.1 201"), "{answer}");
        let (mut app, status) = stopper.join().unwrap();
        assert!(status.success(), "clean exit: {status:?}");
        app.spawn();
        let t = crate::support::Tenant {
            base: app.base.clone(),
            creds: t.creds.clone(),
        };
        let r = t.get("/v2/contacts?last_name=InFlight").expect(200);
        assert_eq!(r.body["meta"]["pagination"]["totalCount"], 1);
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

/// A process whose data key cannot open what the database holds refuses
/// to start instead of reading secrets back as nothing.
#[test]
fn a_wrong_data_key_is_refused() {
    let app = TestApp::start(crate::support::Engine::Sqlite).unwrap();
    app.bootstrap();
    let wrong = {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(rand::random::<[u8; 32]>())
    };
    let out = Command::new(BIN)
        .args(["bootstrap", "--json"])
        .env("FERROGATE_DATABASE_URL", &app.database_url)
        .env("FERROGATE_DATA_KEY", wrong.trim())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("FERROGATE_DATA_KEY"), "{err}");
    let serve = Command::new(BIN)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env("FERROGATE_DATABASE_URL", &app.database_url)
        .env("FERROGATE_DATA_KEY", wrong.trim())
        .output()
        .unwrap();
    assert!(!serve.status.success(), "serve refuses to start");
    // The right key still works.
    app.bootstrap();
}

/// The load generator runs against a server: the bare-http ceiling (its
/// own echo server) and a scenario of the API, every request answered.
#[test]
fn the_load_generator_measures_the_ceiling_and_the_api() {
    let app = TestApp::start(crate::support::Engine::Sqlite).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ferrogate-bench"))
        .args(["--url", &app.base, "--ferrogate-bin", crate::support::BIN])
        .args(["--scenarios", "bare-http,contact-create", "--concurrency", "2"])
        .args(["--duration", "1", "--warmup", "0", "--json"])
        .env("FERROGATE_DATABASE_URL", &app.database_url)
        .env("FERROGATE_DATA_KEY", &app.data_key)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let runs: Vec<serde_json::Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    for name in ["bare-http", "contact-create"] {
        let run = runs
            .iter()
            .find(|r| r["scenario"] == name)
            .unwrap_or_else(|| panic!("no {name} line in {stdout}"));
        assert!(run["requests"].as_u64().unwrap() > 0, "{run}");
        assert_eq!(run["errors"], 0, "{run}");
    }
}
