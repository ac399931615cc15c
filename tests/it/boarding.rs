//! Boarding API v1: offers, applications and their answers, the signature
//! that publishes them, the operator command that makes a merchant, and
//! the sensitive answers nowhere in clear.

use crate::engine_tests;
use crate::support::db::db;
use crate::support::{error_fields, fields, str_of, Client, Resp, TestApp, BIN};
use serde_json::{json, Value};
use std::process::Command;

engine_tests!(
    offer_application_signature_merchant,
    sensitive_answers_are_sealed_masked_and_never_logged,
    every_group_is_validated_field_by_field,
    a_put_is_a_whole_resubmission,
    offers_rule_their_applications,
    offer_administration_needs_an_operator_token,
    refusals_are_clear_and_change_nothing,
    signing_and_boarding_happen_once_under_concurrency,
    sealed_answers_follow_a_key_rotation,
    operator_lists_come_a_page_at_a_time,
    small_refusals_say_why,
);

const SSN: &str = "219097531";
const ACCOUNT: &str = "90817263541";
const LICENSE: &str = "D7319824";

/// Runs `ferrogate boarding ...` against the app's database.
fn cli(app: &TestApp, args: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .arg("boarding")
        .args(args)
        .env("FERROGATE_DATABASE_URL", &app.database_url)
        .env("FERROGATE_DATA_KEY", &app.data_key)
        .output()
        .expect("run ferrogate boarding")
}

fn cli_json(app: &TestApp, args: &[&str]) -> Value {
    let out = cli(app, args);
    assert!(
        out.status.success(),
        "boarding {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(stdout.trim().lines().count(), 1, "one JSON line: {stdout}");
    serde_json::from_str(stdout.trim()).expect("JSON")
}

fn offer(app: &TestApp, vanity: &str) -> Value {
    cli_json(app, &["offer", "create", "--vanity-url", vanity, "--json"])
}

fn send(app: &TestApp, method: &str, path: &str, body: Option<Value>) -> Resp {
    let body = body.map(|b| b.to_string());
    app.client().send(method, path, &[], body.as_deref())
}

fn operator(app: &TestApp) -> String {
    str_of(&cli_json(app, &["token", "create", "--json"])["token"])
}

fn as_operator(app: &TestApp, token: &str, method: &str, path: &str, body: Option<Value>) -> Resp {
    let auth = format!("Bearer {token}");
    let body = body.map(|b| b.to_string());
    app.client()
        .send(method, path, &[("authorization", auth.as_str())], body.as_deref())
}

fn new_application(app: &TestApp, offer_id: &str, answers: Value) -> Value {
    send(
        app,
        "POST",
        "/v1/application",
        Some(json!({ "offerId": offer_id, "userId": offer_id, "answers": answers })),
    )
    .expect(201)
    .body
}

/// A complete application for an offer with the default keys.
fn complete() -> Value {
    json!({
        "businessOwnership": { "ownershipType": "C Corporation" },
        "businessIndustry": { "industryType": "38", "industrySic": "1731" },
        "customerConsent": { "secCodes": "WEB" },
        "owner1Information": {
            "title": "Mr", "firstName": "Jane", "lastName": "Doe", "address": "5800 NW 39th Ave",
            "unit": "Ste 4", "city": "Gainesville", "state": "FL", "zipCode": "32606-1234",
            "dateOfBirth": "1980-01-15", "socialSecurityNumber": SSN, "driversLicenseNumber": LICENSE,
            "driversLicenseState": "FL", "phoneNumber": "3525550100", "faxNumber": "3525550101",
            "emailAddress": "jane@example.com"
        },
        // The spec's shares are positive and below 100.
        "ownerEquity": { "owner1": 99.5 },
        "organizationInformation": {
            "organizationName": "Doe Hardware LLC", "employerIdentificationNumber": "12-3456789",
            "website": "https://doe.example.com"
        },
        "organizationContact": {
            "title": "Ms.", "firstName": "Ann", "lastName": "Roe", "phoneNumber": "3525550102",
            "emailAddress": "ann@example.com"
        },
        "organizationLocation": {
            "address": "12 Main St", "city": "Gainesville", "state": "FL", "zipCode": "32601",
            "phoneNumber": "3525550103"
        },
        "bankInformation": {
            "routingNumber": "021000021", "accountNumber": ACCOUNT, "accountNumberReEnter": ACCOUNT,
            "bankName": "First Bank"
        },
        "salesInformation": {
            "monthlyVolume": 50000, "averageTicket": "45.50", "highestTicket": 900,
            "amexAnnualVolume": "0-50000"
        }
    })
}

/// A signature made now (the reference's sample is dated 2021-01-15,
/// years before any application these tests make: refused).
fn signature() -> Value {
    json!({ "eConsent": true, "name": "Jane Doe", "ipAddress": "8.8.8.8", "timestamp": signed_now() })
}

/// Now, as a signing form would send it (ISO 8601 with milliseconds).
fn signed_now() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

fn offer_application_signature_merchant(app: &TestApp) {
    // The operator's command makes an open offer with the default keys.
    let made = offer(app, "acme-hardware");
    let r = send(app, "GET", "/v1/offer/vanityurl/acme-hardware", None).expect(200);
    let o = &r.body;
    assert_eq!(o, &made, "the command prints the offer record");
    for key in [
        "offerId",
        "name",
        "verticalName",
        "partnerId",
        "verticalPresetId",
        "pricingBundleId",
        "vanityUrl",
        "vanityDomain",
        "presentationalState",
        "keysAllowable",
        "keysDefaultValue",
        "keysFixedValue",
        "keysRequiredValue",
        "isActive",
        "isPublished",
        "publishedAt",
        "createdAt",
    ] {
        assert!(o.get(key).is_some(), "offer record lacks {key}: {o}");
    }
    assert_eq!(o["isActive"], true);
    assert_eq!(o["isPublished"], true);
    assert_eq!(o["vanityUrl"], "acme-hardware");
    assert_eq!(o["keysFixedValue"]["customerConsent.secCodes"], "WEB");
    assert!(o["presentationalState"]["pages"].as_array().unwrap().len() >= 3);
    let offer_id = str_of(&o["offerId"]);
    assert_eq!(offer_id.len(), 32);
    assert_eq!(uuid::Uuid::parse_str(&offer_id).unwrap().get_version_num(), 4);

    // An application with no answers: a draft with everything missing.
    let a = new_application(app, &offer_id, json!({}));
    let id = str_of(&a["applicationId"]);
    assert_eq!(a["status"], "draft");
    assert_eq!(a["offerId"], offer_id.as_str());
    for key in [
        "applicationId",
        "verticalPresetId",
        "offerId",
        "status",
        "source",
        "createdAt",
        "answers",
    ] {
        assert!(a.get(key).is_some(), "application record lacks {key}: {a}");
    }
    // Defaults and fixed keys are applied from the start.
    assert_eq!(a["answers"]["customerConsent"]["secCodes"], "WEB");
    assert_eq!(a["answers"]["salesInformation"]["amexMarketingOptOut"], false);
    let v = send(app, "GET", &format!("/v1/application/{id}/validate"), None).expect(200);
    assert_eq!(v.body["valid"], false);
    let missing = v.body["errors"].as_object().unwrap();
    for path in [
        "owner1Information.socialSecurityNumber",
        "owner1Information.dateOfBirth",
        "bankInformation.routingNumber",
        "organizationInformation.employeeIdentificationNumber",
    ] {
        assert!(missing.contains_key(path), "{path} not listed: {}", v.text);
    }
    // Signing an incomplete application lists the same problems.
    let r = send(
        app,
        "POST",
        &format!("/v1/application/{id}/signature"),
        Some(signature()),
    )
    .expect(422);
    assert!(error_fields(&r).contains("owner1Information.socialSecurityNumber"));

    // The answers, at the top level.
    let r = send(app, "PUT", &format!("/v1/application/{id}"), Some(complete())).expect(200);
    let answers = &r.body["answers"];
    assert_eq!(
        answers["owner1Information"]["title"], "Mr.",
        "stored as the spec spells it"
    );
    assert_eq!(answers["owner1Information"]["socialSecurityNumber"], "XXXXX7531");
    assert_eq!(answers["owner1Information"]["driversLicenseNumber"], "XXXX9824");
    assert_eq!(answers["bankInformation"]["accountNumber"], "XXXXXXX3541");
    assert_eq!(answers["bankInformation"]["accountNumberReEnter"], "XXXXXXX3541");
    assert_eq!(
        answers["organizationInformation"]["employeeIdentificationNumber"],
        "12-3456789"
    );
    assert_eq!(answers["salesInformation"]["monthlyVolume"], "50000.00");
    assert_eq!(answers["salesInformation"]["averageTicket"], "45.50");
    assert_eq!(answers["salesInformation"]["amexAnnualVolume"], "0-50000");
    assert_eq!(
        r.body,
        send(app, "GET", &format!("/v1/application/{id}"), None)
            .expect(200)
            .body
    );
    let v = send(app, "GET", &format!("/v1/application/{id}/validate"), None).expect(200);
    assert_eq!(v.body["valid"], true, "{}", v.text);
    assert_eq!(v.body["errors"], json!({}));

    // The merchant command refuses a draft.
    let out = cli(app, &["application", "merchant", &id, "--json"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("published"));

    // The signature publishes it; nothing can change afterwards.
    let r = send(
        app,
        "POST",
        &format!("/v1/application/{id}/signature"),
        Some(signature()),
    )
    .expect(200);
    assert_eq!(r.body["status"], "published");
    assert_eq!(r.body["signature"]["ipAddress"], "8.8.8.8");
    assert!(r.body["publishedAt"].is_string());
    let r = send(app, "PUT", &format!("/v1/application/{id}"), Some(complete())).expect(409);
    assert_eq!(error_fields(&r), fields(&["status"]));
    send(
        app,
        "POST",
        &format!("/v1/application/{id}/signature"),
        Some(signature()),
    )
    .expect(409);

    // The operator makes it a merchant, usable at once.
    let boarded = cli_json(app, &["application", "merchant", &id, "--json"]);
    assert_eq!(boarded["status"], "boarded");
    assert_eq!(boarded["applicationId"], id.as_str());
    let tenant = crate::support::Tenant {
        base: app.base.clone(),
        creds: boarded["merchant"].clone(),
    };
    let location_id = tenant.location_id();
    let loc = tenant
        .get(&format!("/v2/locations/{location_id}"))
        .expect(200)
        .body["location"]
        .clone();
    assert_eq!(loc["name"], "Doe Hardware LLC");
    assert_eq!(loc["parent_id"], "00000000000000000000000000000000");
    assert_eq!(loc["address1"], "12 Main St");
    assert_eq!(loc["city"], "Gainesville");
    assert_eq!(loc["zip_code"], "32601");
    for pt in ["cc_product_transaction_id", "ach_product_transaction_id"] {
        tenant
            .get(&format!("/v2/producttransactions/{}", tenant.cred(pt)))
            .expect(200);
    }
    tenant
        .post(
            "/v2/transactions",
            json!({ "transaction": { "action": "sale", "payment_method": "cc", "transaction_amount": "10.00",
                "account_number": "4111111111111111", "exp_date": "1240" } }),
        )
        .expect(201);
    let r = send(app, "GET", &format!("/v1/application/{id}"), None).expect(200);
    assert_eq!(r.body["status"], "boarded");
    assert_eq!(r.body["locationId"], location_id.as_str());
    // Once only.
    let out = cli(app, &["application", "merchant", &id, "--json"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("already a merchant"));
}

fn sensitive_answers_are_sealed_masked_and_never_logged(app: &TestApp) {
    let offer_id = str_of(&offer(app, "sealed")["offerId"]);
    let a = new_application(app, &offer_id, complete());
    let id = str_of(&a["applicationId"]);
    let mut responses = a.to_string();
    responses += &send(app, "GET", &format!("/v1/application/{id}"), None)
        .expect(200)
        .text;
    responses += &send(app, "GET", &format!("/v1/application/{id}/validate"), None)
        .expect(200)
        .text;
    // A rejected resubmission does not echo what it refused either.
    let mut bad = complete();
    bad["bankInformation"]["accountNumberReEnter"] = json!("90817263542");
    let r = send(app, "PUT", &format!("/v1/application/{id}"), Some(bad)).expect(422);
    responses += &r.text;
    responses += &send(
        app,
        "POST",
        &format!("/v1/application/{id}/signature"),
        Some(signature()),
    )
    .expect(200)
    .text;
    let token = operator(app);
    responses += &as_operator(app, &token, "GET", "/v1/applications", None)
        .expect(200)
        .text;
    let boarded = cli_json(app, &["application", "merchant", &id, "--json"]);
    responses += &boarded.to_string();

    let mut database = db(app);
    let log = app.log();
    // The application's id is what lets someone change it: the log shows
    // only its route.
    assert!(!log.contains(&id), "the server log holds the application id");
    for secret in [SSN, ACCOUNT, LICENSE, "90817263542"] {
        assert!(!responses.contains(secret), "a response holds {secret}");
        assert!(!log.contains(secret), "the server log holds {secret}");
        assert_eq!(
            database.columns_containing(secret),
            Vec::<String>::new(),
            "{secret} stored in clear"
        );
    }
    // The raw SQLite files too (pages not yet checkpointed sit in the WAL).
    if app.engine == crate::support::Engine::Sqlite {
        let path = app.database_url.strip_prefix("sqlite://").unwrap();
        for file in [path.to_string(), format!("{path}-wal")] {
            let bytes = std::fs::read(&file).unwrap_or_default();
            for secret in [SSN, ACCOUNT, LICENSE] {
                assert!(
                    !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
                    "{secret} in clear in {file}"
                );
            }
        }
    }
    // Each is sealed under the data key, one row per answer.
    let sealed = database.count(
        "SELECT COUNT(*) FROM boarding_secrets WHERE application_id = ? AND sealed LIKE '%:%'",
        &[&id],
    );
    assert_eq!(sealed, 4, "SSN, licence, account number and its re-entry");
    // The scan itself works.
    assert!(database
        .columns_containing(&id)
        .contains(&"boarding_applications.id".to_string()));
    // A key rotation re-seals them too.
    let rotated = Command::new(BIN)
        .args(["keys", "rotate"])
        .env("FERROGATE_DATABASE_URL", &app.database_url)
        .env("FERROGATE_DATA_KEY", &app.data_key)
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&rotated.stdout).expect("rotation report");
    assert!(rotated.status.success(), "{report}");
    assert!(
        report["columns"].to_string().contains("boarding_secrets.sealed"),
        "{report}"
    );
    assert_eq!(report["remaining"], 0);
}

fn every_group_is_validated_field_by_field(app: &TestApp) {
    let offer_id = str_of(&offer(app, "rules")["offerId"]);
    let id = str_of(&new_application(app, &offer_id, json!({}))["applicationId"]);
    let put = |body: Value| send(app, "PUT", &format!("/v1/application/{id}"), Some(body));
    let bad = json!({
        "businessOwnership": { "ownershipType": "Cooperative" },
        "businessIndustry": { "industryType": "3", "industrySic": "17a1" },
        "customerConsent": { "secCodes": "WEB" },
        "owner1Information": {
            "title": "Sir", "firstName": "J", "lastName": "D".repeat(26), "address": "5",
            "unit": "12345678901", "city": "G", "state": "XX", "zipCode": "3260",
            "dateOfBirth": "1981-02-29", "socialSecurityNumber": "12345678",
            "driversLicenseNumber": "D12", "driversLicenseState": "ZZ", "phoneNumber": "23525550100",
            "faxNumber": "35255501", "emailAddress": "jane@"
        },
        "owner2Information": { "dateOfBirth": "2099-01-01" },
        "owner3Information": { "dateOfBirth": "2015-06-01", "socialSecurityNumber": "000123456" },
        "owner4Information": { "dateOfBirth": "1980-13-01", "zipCode": "32606 1234" },
        "ownerEquity": { "owner1": 0, "owner2": 100, "owner3": 25.555 },
        "organizationInformation": {
            "organizationName": "X", "employeeIdentificationNumber": "123456789", "website": "doe.example.com"
        },
        "organizationContact": { "title": "Lord", "phoneNumber": "555", "emailAddress": "ann.example.com" },
        "organizationLocation": { "state": "Florida", "zipCode": "ABCDE", "phoneNumber": "352555010311" },
        "organizationAddress": { "zipCode": "326011", "city": "A".repeat(26) },
        "bankInformation": {
            "routingNumber": "021000022", "accountNumber": "123456789012345678",
            "accountNumberReEnter": "12a", "bankName": "B"
        },
        "salesInformation": {
            "monthlyVolume": "1000000000.00", "averageTicket": 1.234, "highestTicket": "-5",
            "amexAnnualVolume": "500-100", "amexMarketingOptOut": "perhaps"
        }
    });
    let r = put(bad).expect(422);
    let expected = [
        "businessOwnership.ownershipType",
        "businessIndustry.industryType",
        "businessIndustry.industrySic",
        "owner1Information.title",
        "owner1Information.firstName",
        "owner1Information.lastName",
        "owner1Information.address",
        "owner1Information.unit",
        "owner1Information.city",
        "owner1Information.state",
        "owner1Information.zipCode",
        "owner1Information.dateOfBirth",
        "owner1Information.socialSecurityNumber",
        "owner1Information.driversLicenseNumber",
        "owner1Information.driversLicenseState",
        "owner1Information.phoneNumber",
        "owner1Information.faxNumber",
        "owner1Information.emailAddress",
        "owner2Information.dateOfBirth",
        "owner3Information.dateOfBirth",
        "owner3Information.socialSecurityNumber",
        "owner4Information.dateOfBirth",
        "owner4Information.zipCode",
        "ownerEquity.owner1",
        "ownerEquity.owner2",
        "ownerEquity.owner3",
        "organizationInformation.organizationName",
        "organizationInformation.employeeIdentificationNumber",
        "organizationInformation.website",
        "organizationContact.title",
        "organizationContact.phoneNumber",
        "organizationContact.emailAddress",
        "organizationLocation.state",
        "organizationLocation.zipCode",
        "organizationLocation.phoneNumber",
        "organizationAddress.zipCode",
        "organizationAddress.city",
        "bankInformation.routingNumber",
        "bankInformation.accountNumber",
        "bankInformation.accountNumberReEnter",
        "bankInformation.bankName",
        "salesInformation.monthlyVolume",
        "salesInformation.averageTicket",
        "salesInformation.highestTicket",
        "salesInformation.amexAnnualVolume",
        "salesInformation.amexMarketingOptOut",
    ];
    assert_eq!(error_fields(&r), fields(&expected), "{}", r.text);
    assert!(r.body["request_id"].is_string());
    assert!(r.errors("owner1Information.dateOfBirth")[0].contains("YYYY-MM-DD"));
    assert!(r.errors("owner2Information.dateOfBirth")[0].contains("past"));
    assert!(r.errors("owner3Information.dateOfBirth")[0].contains("18"));
    assert!(r.errors("bankInformation.routingNumber")[0].contains("checksum"));
    // Nothing of it was stored.
    let a = send(app, "GET", &format!("/v1/application/{id}"), None).expect(200);
    assert!(a.body["answers"].get("owner1Information").is_none(), "{}", a.text);

    // Cross-field rules: shares add up to at most 100, the account
    // number typed twice, the average ticket within the highest.
    let r = put(json!({
        "ownerEquity": { "owner1": 60, "owner2": 41 },
        "bankInformation": { "accountNumber": "12345", "accountNumberReEnter": "12346" },
        "salesInformation": { "averageTicket": "100.00", "highestTicket": "99.99" },
    }))
    .expect(422);
    assert_eq!(
        error_fields(&r),
        fields(&[
            "ownerEquity",
            "bankInformation.accountNumberReEnter",
            "salesInformation.averageTicket"
        ])
    );
    // Range labels count by their bounds: an average surely above the
    // highest is refused, one that may be within it is not.
    for (avg, high, refused) in [
        ("600", "0-500", true),
        (">500000", "0-5000", true),
        ("400", "0-500", false),
        ("0-500", "450", false),
        ("100", ">500000", false),
    ] {
        let r = put(json!({ "salesInformation": { "averageTicket": avg, "highestTicket": high } }));
        let refusal = r.status == 422 && error_fields(&r).contains("salesInformation.averageTicket");
        assert_eq!(refusal, refused, "{avg} against {high}: {}", r.text);
        if !refused {
            assert_eq!(r.status, 200, "{avg} against {high}: {}", r.text);
        }
    }

    // Accepted forms: titles without the period, ownership keys, every
    // ZIP form, territories, separators in phone and SSN, amounts as
    // numbers or strings up to 999999999.99, range labels.
    let r = put(json!({
        "businessOwnership": { "ownershipType": "LLC_S_CORP" },
        "owner1Information": { "title": "Dr", "zipCode": "326061234", "state": "PR",
            "phoneNumber": "(352) 555-0100", "socialSecurityNumber": "219-09-7531" },
        "owner2Information": { "title": "CEO", "zipCode": "32606-1234", "state": "GU" },
        "owner3Information": { "title": "Mrs.", "zipCode": "32606", "state": "DC" },
        "ownerEquity": { "owner1": 33.33, "owner2": "33.33", "owner3": 33.34 },
        "organizationInformation": { "employeeIdentificationNumber": "98-7654321", "website": "http://shop.example.org/x" },
        "salesInformation": { "monthlyVolume": "999999999.99", "averageTicket": 12.5, "highestTicket": ">500000",
            "amexAnnualVolume": 0, "amexMarketingOptOut": true },
    }))
    .expect(200);
    let a = &r.body["answers"];
    assert_eq!(a["businessOwnership"]["ownershipType"], "LLC- S Corp");
    assert_eq!(a["owner1Information"]["phoneNumber"], "3525550100");
    assert_eq!(a["owner1Information"]["socialSecurityNumber"], "XXXXX7531");
    assert_eq!(a["ownerEquity"]["owner1"], 33.33);
    assert_eq!(a["ownerEquity"]["owner2"], 33.33, "a number, as sent in text");
    assert_eq!(a["salesInformation"]["monthlyVolume"], "999999999.99");
    assert_eq!(a["salesInformation"]["averageTicket"], "12.50");
    assert_eq!(a["salesInformation"]["highestTicket"], ">500000");
    assert_eq!(a["salesInformation"]["amexMarketingOptOut"], true);

    // Unknown groups and answers are named.
    let r = put(json!({ "ownerInformation": {}, "owner1Information": { "middleName": "Q" } })).expect(422);
    assert_eq!(
        error_fields(&r),
        fields(&["ownerInformation", "owner1Information.middleName"])
    );
    let r = put(json!({ "owner1Information": "Jane" })).expect(422);
    assert_eq!(error_fields(&r), fields(&["owner1Information"]));

    // Signature: consent, a name, a public address, an ISO 8601 time.
    let sign = |body: Value| {
        send(
            app,
            "POST",
            &format!("/v1/application/{id}/signature"),
            Some(body),
        )
    };
    for (ip, ok) in [
        ("10.1.2.3", false),
        ("127.0.0.1", false),
        ("192.168.0.7", false),
        ("169.254.1.1", false),
        ("::1", false),
        ("fd00::1", false),
        ("not-an-ip", false),
        ("2001:4860:4860::8888", true),
    ] {
        let r =
            sign(json!({ "eConsent": true, "name": "Jane Doe", "ipAddress": ip, "timestamp": signed_now() }));
        assert_eq!(r.status, 422, "{ip}: {}", r.text);
        // A public address passes; the incomplete answers still refuse.
        assert_eq!(!error_fields(&r).contains("ipAddress"), ok, "{ip}: {}", r.text);
    }
    let r =
        sign(json!({ "eConsent": false, "name": "J", "timestamp": "15/01/2021", "extra": 1 })).expect(422);
    assert_eq!(
        error_fields(&r),
        fields(&["eConsent", "name", "ipAddress", "timestamp", "extra"])
    );
    let r = sign(json!({ "eConsent": true, "name": "Jane Doe", "ipAddress": "8.8.8.8", "timestamp": "2999-01-01T00:00:00Z" }))
        .expect(422);
    assert_eq!(error_fields(&r), fields(&["timestamp"]));
    // eConsent is a boolean, the timestamp ISO 8601 (a T, not a space)
    // and a string.
    for consent in [json!("true"), json!(1)] {
        let r = sign(json!({ "eConsent": consent, "name": "Jane Doe", "ipAddress": "8.8.8.8", "timestamp": signed_now() }))
            .expect(422);
        assert!(error_fields(&r).contains("eConsent"), "{consent}: {}", r.text);
    }
    for ts in [json!("2021-01-15 16:34:41Z"), json!(1610728481)] {
        let r =
            sign(json!({ "eConsent": true, "name": "Jane Doe", "ipAddress": "8.8.8.8", "timestamp": ts }))
                .expect(422);
        assert!(error_fields(&r).contains("timestamp"), "{ts}: {}", r.text);
        assert!(r.text.contains("ISO 8601"), "{}", r.text);
    }
}

fn a_put_is_a_whole_resubmission(app: &TestApp) {
    let offer_id = str_of(&offer(app, "resubmit")["offerId"]);
    let id = str_of(&new_application(app, &offer_id, complete())["applicationId"]);
    let v = send(app, "GET", &format!("/v1/application/{id}/validate"), None).expect(200);
    assert_eq!(v.body["valid"], true, "{}", v.text);
    // Omitted groups and blank fields are erased; defaults come back.
    let mut next = json!({
        "owner1Information": complete()["owner1Information"].clone(),
        "salesInformation": { "monthlyVolume": "10.00" },
    });
    next["owner1Information"]["socialSecurityNumber"] = json!("");
    next["owner1Information"]["faxNumber"] = Value::Null;
    let r = send(app, "PUT", &format!("/v1/application/{id}"), Some(next)).expect(200);
    let a = &r.body["answers"];
    assert!(a.get("bankInformation").is_none(), "{a}");
    assert!(
        a["owner1Information"].get("socialSecurityNumber").is_none(),
        "{a}"
    );
    assert!(a["owner1Information"].get("faxNumber").is_none(), "{a}");
    assert_eq!(a["owner1Information"]["firstName"], "Jane");
    assert_eq!(a["salesInformation"]["amexMarketingOptOut"], false);
    assert_eq!(a["customerConsent"]["secCodes"], "WEB");
    assert_eq!(
        db(app).count(
            "SELECT COUNT(*) FROM boarding_secrets WHERE application_id = ?",
            &[&id]
        ),
        1,
        "only the licence number is left"
    );
    let v = send(app, "GET", &format!("/v1/application/{id}/validate"), None).expect(200);
    assert_eq!(v.body["valid"], false);
    assert!(
        v.body["errors"]["bankInformation.accountNumber"].is_array(),
        "{}",
        v.text
    );
    assert!(v.body["errors"]["owner1Information.socialSecurityNumber"][0]
        .as_str()
        .unwrap()
        .contains("blank"));
}

fn offers_rule_their_applications(app: &TestApp) {
    let token = operator(app);
    let body = json!({
        "name": "Restaurants", "vanityUrl": "eat", "verticalName": "Restaurant",
        "partnerId": "p-1", "verticalPresetId": "vp-9", "pricingBundleId": "pb-2", "vanityDomain": "board.example.com",
        "keysAllowable": ["businessOwnership", "owner1Information.firstName", "owner1Information.lastName",
            "businessIndustry", "customerConsent", "salesInformation"],
        "keysFixedValue": { "businessIndustry.industrySic": "5812" },
        "keysDefaultValue": { "businessOwnership.ownershipType": "SOLE_PROPRIETOR" },
        "keysRequiredValue": ["owner1Information.firstName", "owner1Information.lastName"],
        "isActive": true, "isPublished": false,
    });
    let o = as_operator(app, &token, "POST", "/v1/offer", Some(body))
        .expect(201)
        .body;
    let offer_id = str_of(&o["offerId"]);
    assert_eq!(o["publishedAt"], Value::Null);
    // Preset values are kept as applications will hold them.
    assert_eq!(
        o["keysDefaultValue"]["businessOwnership.ownershipType"],
        "Sole Proprietor"
    );
    assert_eq!(o["verticalPresetId"], "vp-9");
    // Unpublished: not reachable, not open for applications.
    send(app, "GET", "/v1/offer/vanityurl/eat", None).expect(404);
    let r = send(
        app,
        "POST",
        "/v1/application",
        Some(json!({ "offerId": offer_id, "userId": offer_id })),
    )
    .expect(422);
    assert_eq!(error_fields(&r), fields(&["offerId"]));
    let o = as_operator(
        app,
        &token,
        "PUT",
        &format!("/v1/offer/{offer_id}"),
        Some(json!({ "isPublished": true })),
    )
    .expect(200)
    .body;
    assert!(o["publishedAt"].is_string());
    assert_eq!(
        send(app, "GET", "/v1/offer/vanityurl/eat", None).expect(200).body,
        o
    );

    let a = new_application(
        app,
        &offer_id,
        json!({ "owner1Information": { "firstName": "Li" } }),
    );
    let id = str_of(&a["applicationId"]);
    assert_eq!(a["verticalPresetId"], "vp-9");
    assert_eq!(a["answers"]["businessIndustry"]["industrySic"], "5812");
    assert_eq!(
        a["answers"]["businessOwnership"]["ownershipType"],
        "Sole Proprietor"
    );
    let v = send(app, "GET", &format!("/v1/application/{id}/validate"), None).expect(200);
    assert_eq!(
        v.body["errors"],
        json!({ "owner1Information.lastName": ["Last name cannot be blank."] })
    );
    // Fixed keys cannot change (the same value may be sent); answers the
    // offer does not take are refused.
    let put = |body: Value| send(app, "PUT", &format!("/v1/application/{id}"), Some(body));
    let r = put(json!({ "businessIndustry": { "industrySic": "1731" } })).expect(422);
    assert_eq!(error_fields(&r), fields(&["businessIndustry.industrySic"]));
    let r = put(json!({ "owner1Information": { "firstName": "Li", "city": "Ocala" }, "bankInformation": { "bankName": "First" } }))
        .expect(422);
    assert_eq!(
        error_fields(&r),
        fields(&["owner1Information.city", "bankInformation.bankName"])
    );
    put(json!({ "businessIndustry": { "industrySic": "5812" }, "owner1Information": { "firstName": "Li", "lastName": "Wu" } }))
        .expect(200);
    let v = send(app, "GET", &format!("/v1/application/{id}/validate"), None).expect(200);
    assert_eq!(v.body["valid"], true, "{}", v.text);
    send(
        app,
        "POST",
        &format!("/v1/application/{id}/signature"),
        Some(signature()),
    )
    .expect(200);

    // A deactivated offer takes no new applications.
    as_operator(
        app,
        &token,
        "PUT",
        &format!("/v1/offer/{offer_id}"),
        Some(json!({ "isActive": false })),
    )
    .expect(200);
    send(app, "GET", "/v1/offer/vanityurl/eat", None).expect(404);
    send(
        app,
        "POST",
        "/v1/application",
        Some(json!({ "offerId": offer_id, "userId": offer_id })),
    )
    .expect(422);

    // Offers' own rules are checked.
    let r = as_operator(
        app,
        &token,
        "POST",
        "/v1/offer",
        Some(json!({
            "name": "", "vanityUrl": "bad url", "keysAllowable": ["nope"], "keysRequiredValue": "x",
            "keysFixedValue": { "owner1Information.socialSecurityNumber": "219097531", "owner1Information.state": "Z" },
            "keysDefaultValue": { "a.b": 1 }, "isActive": "yes", "offerId": "x", "colour": "red",
        })),
    )
    .expect(422);
    assert_eq!(
        error_fields(&r),
        fields(&[
            "name",
            "vanityUrl",
            "keysAllowable",
            "keysRequiredValue",
            "keysFixedValue",
            "keysFixedValue.owner1Information.state",
            "keysDefaultValue",
            "isActive",
            "offerId",
            "colour"
        ])
    );
    assert!(!r.text.contains("219097531"), "a refused secret is not echoed");
    // Vanity urls are unique.
    let r = as_operator(
        app,
        &token,
        "POST",
        "/v1/offer",
        Some(json!({ "name": "Again", "vanityUrl": "eat" })),
    )
    .expect(409);
    assert_eq!(error_fields(&r), fields(&["vanityUrl"]));
    let out = cli(app, &["offer", "create", "--vanity-url", "eat", "--json"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("vanityUrl"));
    let list = as_operator(app, &token, "GET", "/v1/offers", None).expect(200);
    assert_eq!(list.body["offers"].as_array().unwrap().len(), 1);
    let apps = as_operator(app, &token, "GET", "/v1/applications?status=published", None).expect(200);
    assert_eq!(apps.body["applications"][0]["applicationId"], id.as_str());
}

fn offer_administration_needs_an_operator_token(app: &TestApp) {
    let body = json!({ "name": "X", "vanityUrl": "x" });
    for (method, path) in [
        ("POST", "/v1/offer"),
        ("GET", "/v1/offers"),
        ("GET", "/v1/applications"),
        ("GET", "/v1/offer/00000000000000000000000000000000"),
        ("PUT", "/v1/offer/00000000000000000000000000000000"),
    ] {
        let b = (method != "GET").then(|| body.clone());
        let r = send(app, method, path, b.clone()).expect(401);
        assert!(
            r.body["message"].as_str().unwrap().contains("Bearer"),
            "{}",
            r.text
        );
        as_operator(app, "fgop_wrong", method, path, b.clone()).expect(401);
        // v2 credentials are not operator credentials.
        let t = app.bootstrap();
        t.send(method, path, b.map(|b| b.to_string()).as_deref())
            .expect(401);
    }
    let token = operator(app);
    as_operator(app, &token, "GET", "/v1/offers", None).expect(200);
    let listed = cli_json(app, &["offer", "list", "--json"]);
    assert_eq!(listed["offers"], json!([]));
    // A revoked token stops working.
    let made = cli_json(app, &["token", "create", "--name", "ci", "--json"]);
    let t2 = str_of(&made["token"]);
    as_operator(app, &t2, "GET", "/v1/offers", None).expect(200);
    cli_json(app, &["token", "revoke", "--token-id", &str_of(&made["tokenId"])]);
    as_operator(app, &t2, "GET", "/v1/offers", None).expect(401);
    as_operator(app, &token, "GET", "/v1/offers", None).expect(200);
    // Tokens are stored as digests only.
    assert!(db(app).columns_containing(&t2).is_empty());
    // An id that is no UUID names no offer (a NUL never reaches the
    // database).
    for bad in ["%00", "x%00y", "not-a-uuid"] {
        let r = as_operator(app, &token, "GET", &format!("/v1/offer/{bad}"), None);
        assert_eq!(r.status, 404, "{bad}: {}", r.text);
    }
    // What an offer requires or presets must be answerable under its
    // keysAllowable: otherwise no application could ever be signed.
    let r = as_operator(
        app,
        &token,
        "POST",
        "/v1/offer",
        Some(json!({ "name": "Narrow", "vanityUrl": "narrow", "keysAllowable": ["owner1Information"] })),
    );
    assert_eq!(r.status, 422, "{}", r.text);
    assert!(r.body["errors"]["keysRequiredValue"].is_array(), "{}", r.text);
    assert!(r.body["errors"]["keysFixedValue"].is_array(), "{}", r.text);
}

fn refusals_are_clear_and_change_nothing(app: &TestApp) {
    let offer_id = str_of(&offer(app, "refusals")["offerId"]);
    let client: Client = app.client();
    let count = || db(app).count("SELECT COUNT(*) FROM boarding_applications", &[]);
    for (body, status) in [
        ("", 400),
        ("{", 400),
        ("[1]", 400),
        ("{\"offerId\":1,\"offerId\":2}", 400),
        ("{}", 422),
        ("{\"offerId\":\"nope\",\"userId\":\"x\"}", 422),
        ("{\"offerId\":\"00000000000040008000000000000000\",\"userId\":\"00000000000040008000000000000000\"}", 422),
        (&format!("{{\"offerId\":\"{offer_id}\",\"userId\":\"{offer_id}\",\"answers\":[]}}"), 422),
        (&format!("{{\"offerId\":\"{offer_id}\",\"userId\":\"{offer_id}\",\"answers\":{{\"ownerEquity\":{{\"owner1\":500}}}}}}"), 422),
        (&format!("{{\"offerId\":\"{offer_id}\",\"userId\":\"{offer_id}\",\"other\":1}}"), 422),
    ] {
        let r = client.send("POST", "/v1/application", &[], Some(body));
        assert_eq!(r.status, status, "{body}: {}", r.text);
        assert!(r.body["request_id"].is_string(), "{}", r.text);
        assert_eq!(count(), 0, "{body} wrote something");
    }
    let r = client.send(
        "POST",
        "/v1/application",
        &[("content-type", "text/plain")],
        Some("{}"),
    );
    assert_eq!(r.status, 415);
    // Hyphenated ids are the same ids.
    let hyphenated = uuid::Uuid::parse_str(&offer_id).unwrap().hyphenated().to_string();
    let a = new_application(app, &hyphenated, json!(null));
    let id = str_of(&a["applicationId"]);
    assert_eq!(a["offerId"], offer_id.as_str());
    for path in [
        "/v1/application/nope".to_string(),
        "/v1/application/00000000000040008000000000000000".to_string(),
        "/v1/application/00000000000040008000000000000000/validate".to_string(),
        "/v1/offer/vanityurl/nope".to_string(),
        "/v1/offer/vanityurl/%00".to_string(),
    ] {
        let r = send(app, "GET", &path, None);
        assert_eq!(r.status, 404, "{path}: {}", r.text);
    }
    send(
        app,
        "PUT",
        "/v1/application/00000000000040008000000000000000",
        Some(json!({})),
    )
    .expect(404);
    send(
        app,
        "POST",
        "/v1/application/00000000000040008000000000000000/signature",
        Some(signature()),
    )
    .expect(404);
    for body in ["", "[]", "nope"] {
        let r = client.send("PUT", &format!("/v1/application/{id}"), &[], Some(body));
        assert_eq!(r.status, 400, "{body}: {}", r.text);
    }
    send(app, "DELETE", &format!("/v1/application/{id}"), None).expect(405);
    let out = cli(
        app,
        &[
            "application",
            "merchant",
            "00000000000040008000000000000000",
            "--json",
        ],
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not found"));
    let out = cli(app, &["offer", "create", "--vanity-url", "has space", "--json"]);
    assert!(!out.status.success());
    assert!(!app.log().contains("panicked"));
}

fn signing_and_boarding_happen_once_under_concurrency(app: &TestApp) {
    let offer_id = str_of(&offer(app, "race")["offerId"]);
    let id = str_of(&new_application(app, &offer_id, complete())["applicationId"]);
    // Signatures racing with resubmissions: one signature wins, and the
    // answers it published are whole.
    let statuses: Vec<(bool, u16)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let id = &id;
                s.spawn(move || {
                    if i % 2 == 0 {
                        let r = send(
                            app,
                            "POST",
                            &format!("/v1/application/{id}/signature"),
                            Some(signature()),
                        );
                        (true, r.status)
                    } else {
                        let r = send(app, "PUT", &format!("/v1/application/{id}"), Some(complete()));
                        (false, r.status)
                    }
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let signed = statuses.iter().filter(|(sign, st)| *sign && *st == 200).count();
    assert_eq!(signed, 1, "{statuses:?}");
    assert!(
        statuses.iter().all(|(_, st)| *st == 200 || *st == 409),
        "{statuses:?}"
    );
    let a = send(app, "GET", &format!("/v1/application/{id}"), None).expect(200);
    assert_eq!(a.body["status"], "published");
    assert_eq!(
        a.body["answers"]["bankInformation"]["accountNumber"],
        "XXXXXXX3541"
    );
    assert_eq!(
        db(app).count(
            "SELECT COUNT(*) FROM boarding_secrets WHERE application_id = ?",
            &[&id]
        ),
        4
    );
    // Merchant commands racing: one merchant.
    let before = db(app).count("SELECT COUNT(*) FROM locations WHERE parent_id IS NOT NULL", &[]);
    let outcomes: Vec<bool> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..3)
            .map(|_| {
                s.spawn(|| {
                    cli(app, &["application", "merchant", &id, "--json"])
                        .status
                        .success()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(outcomes.iter().filter(|ok| **ok).count(), 1, "{outcomes:?}");
    let after = db(app).count("SELECT COUNT(*) FROM locations WHERE parent_id IS NOT NULL", &[]);
    assert_eq!(after - before, 1, "exactly one merchant location");
}

fn sealed_answers_follow_a_key_rotation(app: &mut TestApp) {
    let offer_id = str_of(&offer(app, "rotate")["offerId"]);
    let id = str_of(&new_application(app, &offer_id, complete())["applicationId"]);
    let before = db(app).text(
        "SELECT sealed FROM boarding_secrets WHERE application_id = ? AND path = ?",
        &[&id, "owner1Information.socialSecurityNumber"],
    );
    // A new key, the old one as previous; then a rotation.
    let old_key = app.data_key.clone();
    let out = Command::new(BIN).args(["keys", "generate"]).output().unwrap();
    let new_key = String::from_utf8(out.stdout).unwrap().trim().to_string();
    app.kill();
    app.data_key = new_key;
    app.extra_env = vec![("FERROGATE_DATA_KEY_PREVIOUS".into(), old_key)];
    app.spawn();
    let rotated = Command::new(BIN)
        .args(["keys", "rotate"])
        .env("FERROGATE_DATABASE_URL", &app.database_url)
        .env("FERROGATE_DATA_KEY", &app.data_key)
        .env("FERROGATE_DATA_KEY_PREVIOUS", &app.extra_env[0].1)
        .output()
        .unwrap();
    assert!(
        rotated.status.success(),
        "{}",
        String::from_utf8_lossy(&rotated.stderr)
    );
    let after = db(app).text(
        "SELECT sealed FROM boarding_secrets WHERE application_id = ? AND path = ?",
        &[&id, "owner1Information.socialSecurityNumber"],
    );
    assert_ne!(before[..8], after[..8], "re-sealed under the new key");
    // With the new key alone, the answers still open: validation and the
    // merchant step read them.
    app.kill();
    app.extra_env.clear();
    app.spawn();
    let v = send(app, "GET", &format!("/v1/application/{id}/validate"), None).expect(200);
    assert_eq!(v.body["valid"], true, "{}", v.text);
    send(
        app,
        "POST",
        &format!("/v1/application/{id}/signature"),
        Some(signature()),
    )
    .expect(200);
    let boarded = cli_json(app, &["application", "merchant", &id, "--json"]);
    assert_eq!(boarded["status"], "boarded");
}

/// `/v1/offers` and `/v1/applications` page as v2 lists do (`page`,
/// `page_size`, `meta.pagination`) instead of stopping silently at 1000;
/// the operator's token is taken under any case of its scheme.
fn operator_lists_come_a_page_at_a_time(app: &TestApp) {
    let token = operator(app);
    for scheme in ["Bearer", "bearer", "BEARER", "bEaReR"] {
        let auth = format!("{scheme} {token}");
        let r = app
            .client()
            .send("GET", "/v1/offers", &[("authorization", auth.as_str())], None);
        assert_eq!(r.status, 200, "{scheme}: {}", r.text);
    }
    let ids: Vec<String> = (0..3)
        .map(|i| str_of(&offer(app, &format!("paged-{i}"))["offerId"]))
        .collect();
    let get = |path: &str| as_operator(app, &token, "GET", path, None);
    let first = get("/v1/offers?page_size=2").expect(200);
    let pagination = &first.body["meta"]["pagination"];
    assert_eq!(pagination["totalCount"], 3, "{}", first.text);
    assert_eq!(pagination["pageCount"], 2);
    assert_eq!(pagination["currentPage"], 0);
    assert_eq!(pagination["perPage"], 2);
    let next = pagination["links"]["next"]["href"].as_str().unwrap();
    assert!(next.ends_with("/v1/offers?page_size=2&page=2"), "{next}");
    let second = get("/v1/offers?page_size=2&page=2").expect(200);
    assert!(second.body["meta"]["pagination"]["links"]["next"].is_null());
    let mut listed: Vec<String> = [&first, &second]
        .iter()
        .flat_map(|r| r.body["offers"].as_array().unwrap().clone())
        .map(|o| str_of(&o["offerId"]))
        .collect();
    assert_eq!(listed.len(), 3);
    listed.sort();
    let mut made = ids.clone();
    made.sort();
    assert_eq!(listed, made, "every offer once, over the pages");
    assert_eq!(
        get("/v1/offers").expect(200).body["meta"]["pagination"]["perPage"],
        20
    );
    for bad in ["page=0", "page_size=0", "page_size=101", "page=x", "sort=name"] {
        let r = get(&format!("/v1/offers?{bad}"));
        assert_eq!(r.status, 422, "{bad}: {}", r.text);
    }
    for id in &ids {
        new_application(app, id, json!({}));
    }
    let apps = get("/v1/applications?status=draft&page_size=2").expect(200);
    assert_eq!(apps.body["applications"].as_array().unwrap().len(), 2);
    let pagination = &apps.body["meta"]["pagination"];
    assert_eq!(pagination["totalCount"], 3, "{}", apps.text);
    let next = pagination["links"]["next"]["href"].as_str().unwrap();
    assert!(
        next.ends_with("/v1/applications?status=draft&page_size=2&page=2"),
        "{next}"
    );
    let rest = get("/v1/applications?status=draft&page_size=2&page=2").expect(200);
    assert_eq!(rest.body["applications"].as_array().unwrap().len(), 1);
    let none = get("/v1/applications?status=boarded").expect(200);
    assert_eq!(none.body["meta"]["pagination"]["totalCount"], 0);
    get("/v1/applications?page=0").expect(422);
}

/// A control character in a text member is named as such (it used to be
/// "must be 1 to 128 characters"); a signature is not dated long before
/// its application (0001-01-01 was taken); vanity urls are unique
/// whatever their case.
fn small_refusals_say_why(app: &TestApp) {
    let token = operator(app);
    let made = offer(app, "why");
    let offer_id = str_of(&made["offerId"]);
    let r = as_operator(
        app,
        &token,
        "PUT",
        &format!("/v1/offer/{offer_id}"),
        Some(json!({ "verticalName": "Hard\u{1}ware" })),
    )
    .expect(422);
    assert_eq!(
        r.errors("verticalName"),
        ["Vertical name must not contain control characters (such as a line break or a tab)."],
        "{}",
        r.text
    );
    for taken in ["WHY", "Why"] {
        let r = as_operator(
            app,
            &token,
            "POST",
            "/v1/offer",
            Some(json!({ "name": "Shouting", "vanityUrl": taken })),
        )
        .expect(409);
        assert!(!r.errors("vanityUrl").is_empty(), "{taken}: {}", r.text);
    }
    // Looked up as given: another case is no other offer.
    send(app, "GET", "/v1/offer/vanityurl/WHY", None).expect(404);

    let id = str_of(&new_application(app, &offer_id, complete())["applicationId"]);
    let sign = |changes: Value| {
        let mut body = signature();
        for (k, v) in changes.as_object().unwrap() {
            body[k] = v.clone();
        }
        send(
            app,
            "POST",
            &format!("/v1/application/{id}/signature"),
            Some(body),
        )
    };
    let r = sign(json!({ "name": "Jane\u{7}Doe" })).expect(422);
    assert_eq!(
        r.errors("name"),
        ["Name must not contain control characters (such as a line break or a tab)."],
        "{}",
        r.text
    );
    let two_days_ago = (chrono::Utc::now() - chrono::Duration::days(2))
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    for old in [
        "0001-01-01T00:00:00Z",
        "2021-01-15T16:34:41.766Z",
        two_days_ago.as_str(),
    ] {
        let r = sign(json!({ "timestamp": old })).expect(422);
        assert_eq!(error_fields(&r), fields(&["timestamp"]), "{old}: {}", r.text);
        assert!(
            r.errors("timestamp")[0].contains("more than a day before the application was created"),
            "{old}: {}",
            r.text
        );
    }
    let app_record = send(app, "GET", &format!("/v1/application/{id}"), None).expect(200);
    assert_eq!(app_record.body["status"], "draft", "nothing signed");
    // Signed an hour before it was created (a form that took the
    // signature with the answers): taken.
    let hour_ago = (chrono::Utc::now() - chrono::Duration::hours(1))
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let r = sign(json!({ "timestamp": hour_ago })).expect(200);
    assert_eq!(r.body["status"], "published");
}
