//! BIN lookup: `GET /v2/bins/{bin}` with built-in brands only, and after
//! `ferrogate bins import` of the shared public range file
//! (../shared/data/bins/ranges.csv beside the repository, or the file
//! FERROGATE_TEST_BIN_RANGES names; tests that need it skip without it).

use crate::engine_tests;
use crate::support::{Client, TestApp, BIN};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::{Command, Output};

engine_tests!(
    import_then_lookup_issuer_data,
    import_is_idempotent,
    import_reports_bad_rows_and_refuses_unusable_files,
    brand_without_data,
    bad_input_unknown_bins_and_access
);

/// The shared range file, when present.
fn ranges_csv() -> Option<PathBuf> {
    let path = std::env::var_os("FERROGATE_TEST_BIN_RANGES")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/data/bins/ranges.csv"));
    if path.is_file() {
        Some(path)
    } else {
        eprintln!(
            "skipped: {} is absent (set FERROGATE_TEST_BIN_RANGES to the range file)",
            path.display()
        );
        None
    }
}

/// Runs `ferrogate bins import FILE ARGS...` against the app's database.
fn import(app: &TestApp, file: &std::path::Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .args(["bins", "import"])
        .arg(file)
        .args(args)
        .env("FERROGATE_DATABASE_URL", &app.database_url)
        .env_remove("FERROGATE_DATA_KEY")
        .output()
        .expect("run bins import")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[track_caller]
fn imported(app: &TestApp, file: &std::path::Path) -> String {
    let out = import(app, file, &[]);
    assert!(out.status.success(), "import failed: {}", stderr(&out));
    stdout(&out)
}

/// The number of stored ranges, read from the database itself.
fn stored_ranges(app: &TestApp) -> i64 {
    if let Some(path) = app.database_url.strip_prefix("sqlite://") {
        let conn = rusqlite::Connection::open(path).unwrap();
        conn.query_row("SELECT COUNT(*) FROM bin_ranges", [], |r| r.get(0))
            .unwrap()
    } else {
        let mut c = postgres::Client::connect(&app.database_url, postgres::NoTls).unwrap();
        c.query_one("SELECT COUNT(*) FROM bin_ranges", &[])
            .unwrap()
            .get(0)
    }
}

/// Every field of the spec's `bin` record, in order, and its link.
const BIN_FIELDS: [&str; 17] = [
    "bin",
    "card_brand",
    "issuing_organization",
    "card_type",
    "card_category",
    "issuing_country_name_iso",
    "issuing_country_code_iso_a2",
    "issuing_country_code_iso_a3",
    "issuing_country_iso_number",
    "issuing_organization_website",
    "issuing_organization_phone",
    "max_pan_length",
    "bin_type",
    "is_regulated",
    "fsa_indicator",
    "created",
    "_links",
];

#[track_caller]
fn bin_record(t: &crate::support::Tenant, bin: &str) -> Value {
    let r = t.get(&format!("/v2/bins/{bin}")).expect(200);
    let record = r.body["bin"].clone();
    let keys: Vec<&str> = record
        .as_object()
        .unwrap_or_else(|| panic!("no bin object: {}", r.text))
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, BIN_FIELDS, "{bin}: every field of the spec's record");
    assert_eq!(record["bin"], bin);
    assert!(
        record["_links"]["self"]["href"]
            .as_str()
            .is_some_and(|h| h.ends_with(&format!("/v2/bins/{bin}"))),
        "{record}"
    );
    record
}

/// Asserts the listed fields; the issuer fields not listed must be null.
#[track_caller]
fn check(record: &Value, expected: Value) {
    for (k, v) in expected.as_object().unwrap() {
        assert_eq!(&record[k], v, "{k} of {record}");
    }
}

fn import_then_lookup_issuer_data(app: &TestApp) {
    let Some(file) = ranges_csv() else { return };
    let t = app.bootstrap();
    // Before the import: the brand only.
    let before = bin_record(&t, "360218");
    assert_eq!(before["card_brand"], "DINERS CLUB");
    assert_eq!(before["issuing_organization"], Value::Null);

    let out = imported(app, &file);
    assert!(out.contains("read 5805 rows"), "{out}");
    assert!(out.contains("skipped 0 bad rows"), "{out}");
    assert!(out.contains("the table holds 5805 ranges"), "{out}");

    // 6-digit rows.
    let diners = bin_record(&t, "360218");
    check(
        &diners,
        json!({
            "card_brand": "DINERS CLUB",
            "issuing_organization": "DINERS CLUB DEL ECUADOR S.A.",
            "card_type": "CREDIT",
            "card_category": "Diners Club International",
            "issuing_country_name_iso": "Ecuador",
            "issuing_country_code_iso_a2": "EC",
            "issuing_country_code_iso_a3": "ECU",
            "issuing_country_iso_number": "218",
            "issuing_organization_website": "www.dinersclub.com.ec",
            "issuing_organization_phone": "+593 2 297 3100",
            "max_pan_length": 19,
            "bin_type": "6-digit",
            "is_regulated": false,
            "fsa_indicator": null,
        }),
    );
    assert!(diners["created"].as_i64().unwrap() > 1_600_000_000, "import time");
    check(
        &bin_record(&t, "370245"),
        json!({ "card_brand": "AMERICAN EXPRESS", "issuing_organization": "BANESCO BANCO UNIVERSAL S.A.",
            "issuing_country_code_iso_a3": "VEN", "issuing_country_iso_number": "862", "max_pan_length": 15 }),
    );
    check(
        &bin_record(&t, "601100"),
        json!({ "card_brand": "DISCOVER", "issuing_organization": "DISCOVER", "card_type": "CREDIT",
            "issuing_country_code_iso_a2": "US", "issuing_organization_phone": "8003472683",
            "issuing_organization_website": null, "is_regulated": false }),
    );
    check(
        &bin_record(&t, "453748"),
        json!({ "card_brand": "VISA", "issuing_organization": "SCOTIABANK", "card_type": "DEBIT",
            "card_category": "PREPAID", "issuing_country_name_iso": "Canada", "issuing_country_code_iso_a3": "CAN" }),
    );
    // A range of 6-digit prefixes (371241-371242).
    check(
        &bin_record(&t, "371242"),
        json!({ "issuing_organization": "AMERICAN EXPRESS", "issuing_organization_phone": "8005284800" }),
    );
    // 8-digit rows.
    check(
        &bin_record(&t, "43638410"),
        json!({ "card_brand": "VISA", "issuing_organization": "MACQUARIE BANK", "card_category": "Woolworths",
            "issuing_country_code_iso_a2": "AU", "issuing_country_code_iso_a3": "AUS",
            "issuing_organization_phone": "+61282323333", "bin_type": "8-digit", "max_pan_length": 19 }),
    );
    check(
        &bin_record(&t, "45710042"),
        json!({ "issuing_organization": "Nordea", "card_category": "Visa/Dankort", "card_type": "DEBIT",
            "issuing_country_name_iso": "Denmark", "max_pan_length": 16, "bin_type": "8-digit" }),
    );
    // An 8-digit row inside a 6-digit row: 8 digits first, then 6.
    check(
        &bin_record(&t, "45710800"),
        json!({ "issuing_organization": "Flemløse Sparekasse", "bin_type": "8-digit" }),
    );
    check(
        &bin_record(&t, "45710801"),
        json!({ "issuing_organization": "Handelsbanken", "bin_type": "6-digit" }),
    );
    check(
        &bin_record(&t, "457108"),
        json!({ "issuing_organization": "Handelsbanken", "bin_type": "6-digit" }),
    );
    check(
        &bin_record(&t, "36021899"),
        json!({ "issuing_organization": "DINERS CLUB DEL ECUADOR S.A.", "bin_type": "6-digit" }),
    );
    check(
        &bin_record(&t, "3602189"),
        json!({ "issuing_organization": "DINERS CLUB DEL ECUADOR S.A.", "bin_type": "6-digit" }),
    );
    // A 6-digit BIN that only 8-digit rows partly cover: no single issuer.
    check(
        &bin_record(&t, "457100"),
        json!({ "card_brand": "VISA", "issuing_organization": null, "bin_type": null }),
    );
    check(
        &bin_record(&t, "45710046"),
        json!({ "issuing_organization": "Nordea", "bin_type": "8-digit" }),
    );
    // Not in the file: the brand still answers.
    check(
        &bin_record(&t, "371449"),
        json!({ "card_brand": "AMERICAN EXPRESS", "issuing_organization": null, "max_pan_length": 15 }),
    );
}

fn import_is_idempotent(app: &TestApp) {
    let Some(file) = ranges_csv() else { return };
    let t = app.bootstrap();
    let first = imported(app, &file);
    let count = stored_ranges(app);
    assert_eq!(count, 5805);
    let record = bin_record(&t, "43638410");
    let second = imported(app, &file);
    assert!(first.contains("removed 0 ranges"), "{first}");
    assert!(
        second.contains("removed 5805 ranges, stored 5805 ranges"),
        "{second}"
    );
    assert!(second.contains("the table holds 5805 ranges"), "{second}");
    assert_eq!(stored_ranges(app), count, "a second import leaves the same rows");
    let again = bin_record(&t, "43638410");
    let strip = |mut v: Value| {
        v.as_object_mut().unwrap().remove("created");
        v
    };
    assert_eq!(strip(again), strip(record));
    // The same file under another source name takes the ranges over.
    let third = import(app, &file, &["--source", "binlist"]);
    assert!(third.status.success(), "{}", stderr(&third));
    assert_eq!(stored_ranges(app), count);
}

fn import_reports_bad_rows_and_refuses_unusable_files(app: &TestApp) {
    let t = app.bootstrap();
    let dir = app.dir.join("csv");
    std::fs::create_dir_all(&dir).unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let header = "iin_start,iin_end,number_length,number_luhn,scheme,brand,type,prepaid,country,bank_name,bank_logo,bank_url,bank_phone,bank_city";
    let good = write(
        "mixed.csv",
        &format!(
            "{header}\n400000,,,,visa,,credit,,US,\"FIRST BANK, N.A.\",,www.first.example,,\n4x0001,,,,visa,,credit,,US,BAD,,,,\n400002,,,,visa,,gold,,US,BAD,,,,\n"
        ),
    );
    // A dry run writes nothing.
    let dry = import(app, &good, &["--dry-run"]);
    assert!(dry.status.success(), "{}", stderr(&dry));
    assert!(stdout(&dry).contains("nothing written"), "{}", stdout(&dry));
    assert_eq!(stored_ranges(app), 0);

    let out = import(app, &good, &[]);
    assert!(
        out.status.success(),
        "bad rows alone do not fail: {}",
        stderr(&out)
    );
    let err = stderr(&out);
    assert!(
        err.contains("line 3: iin_start \"4x0001\" is not digits (row skipped)"),
        "{err}"
    );
    assert!(err.contains("line 4: type \"gold\""), "{err}");
    assert!(stdout(&out).contains("skipped 2 bad rows"), "{}", stdout(&out));
    assert!(stdout(&out).contains("source \"mixed\""), "{}", stdout(&out));
    assert_eq!(stored_ranges(app), 1);
    check(
        &bin_record(&t, "400000"),
        json!({ "issuing_organization": "FIRST BANK, N.A.", "issuing_organization_website": "www.first.example" }),
    );

    for (name, text, message) in [
        ("empty.csv", String::new(), "empty"),
        (
            "nohead.csv",
            "bin,bank\n411111,x\n".to_string(),
            "no iin_start column",
        ),
        (
            "allbad.csv",
            format!("{header}\nabc,,,,,,,,,,,,,\n"),
            "none of the 1 rows",
        ),
        (
            "open.csv",
            format!("{header}\n411111,,,,visa,,,,US,\"open\n"),
            "never closed",
        ),
    ] {
        let p = write(name, &text);
        let out = import(app, &p, &[]);
        assert!(!out.status.success(), "{name} must fail");
        assert!(stderr(&out).contains(message), "{name}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("nothing imported"),
            "{name}: {}",
            stderr(&out)
        );
    }
    let missing = import(app, &dir.join("absent.csv"), &[]);
    assert!(!missing.status.success());
    assert!(stderr(&missing).contains("absent.csv"), "{}", stderr(&missing));
    let latin1 = dir.join("latin1.csv");
    std::fs::write(&latin1, b"iin_start,bank_name\n411111,Sparekassen Sj\xe6lland\n").unwrap();
    let out = import(app, &latin1, &[]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("line 2: the file is not UTF-8"),
        "{}",
        stderr(&out)
    );
    assert_eq!(stored_ranges(app), 1, "failed imports wrote nothing");
}

fn brand_without_data(app: &TestApp) {
    let t = app.bootstrap();
    for (bin, brand, max_len) in [
        ("411111", "VISA", 19),
        ("222300", "MASTERCARD", 16),
        ("545454", "MASTERCARD", 16),
        ("371449", "AMERICAN EXPRESS", 15),
        ("601100", "DISCOVER", 19),
        ("353011", "JCB", 19),
        ("305693", "DINERS CLUB", 19),
        ("62212600", "DISCOVER", 19),
        ("621483", "UNIONPAY", 19),
        ("27209912", "MASTERCARD", 16),
    ] {
        let record = bin_record(&t, bin);
        assert_eq!(record["card_brand"], brand, "{bin}");
        assert_eq!(record["max_pan_length"], max_len, "{bin}");
        for field in BIN_FIELDS {
            if !matches!(field, "bin" | "card_brand" | "max_pan_length" | "_links") {
                assert_eq!(
                    record[field],
                    Value::Null,
                    "{bin}: {field} is unknown without data"
                );
            }
        }
    }
}

fn bad_input_unknown_bins_and_access(app: &TestApp) {
    let t = app.bootstrap();
    for bad in [
        "41111a",
        "41111",
        "411111111",
        "abcdef",
        "4111%2011",
        "-41111",
        "4111111111111111",
        // Not UTF-8 once decoded: no BIN either (not a 404).
        "%FF%FE%FD%FC%FB%FA",
    ] {
        let r = t.get(&format!("/v2/bins/{bad}")).expect(422);
        assert!(!r.errors("bin").is_empty(), "{bad}: {}", r.text);
        assert!(r.body["request_id"].is_string());
    }
    // A full card number sent by mistake is not echoed, nor logged.
    let r = t.get("/v2/bins/4111111111111111").expect(422);
    assert!(!r.text.contains("4111111111111111"));
    let r = t.get("/v2/bins/411111?foo=1").expect(422);
    assert!(!r.errors("foo").is_empty(), "{}", r.text);
    for unknown in ["000000", "100000", "99999999", "272100", "7000000"] {
        let r = t.get(&format!("/v2/bins/{unknown}")).expect(404);
        assert!(r.body["message"].is_string(), "{unknown}: JSON body: {}", r.text);
    }
    // Credentials: none is 401; a user without a role 403; either role reads.
    let anonymous = Client {
        base: app.base.clone(),
    };
    for path in ["/v2/bins/411111", "/v2/bins/41111a", "/v2/bins/000000"] {
        let r = anonymous.send("GET", path, &[], None).expect(401);
        assert!(r.body["message"].is_string());
    }
    let loc = t.location_id();
    let (id, key) = t.user(&loc, None);
    t.as_user(&id, &key).get("/v2/bins/411111").expect(403);
    for role in ["2", "132"] {
        let (id, key) = t.user(&loc, Some(role));
        let r = t.as_user(&id, &key).get("/v2/bins/411111").expect(200);
        assert_eq!(r.body["bin"]["card_brand"], "VISA", "role {role}");
    }
    // Trailing slash and verbs.
    t.get("/v2/bins/411111/").expect(200);
    for method in ["POST", "PUT", "DELETE"] {
        let r = t.send(method, "/v2/bins/411111", Some("{}"));
        assert_eq!(r.status, 405, "{method}: {}", r.text);
    }
    t.get("/v2/bins").expect(404);
    // Give the request log a moment, then check it holds no full number.
    std::thread::sleep(std::time::Duration::from_millis(100));
    let log = app.log();
    assert!(log.contains("/v2/bins/411111"), "BINs are logged as sent");
    assert!(
        !log.contains("4111111111111111"),
        "a full card number never reaches the log"
    );
}
