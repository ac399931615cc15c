//! Pages in a real headless browser: Chromium driven by playwright-core
//! (the scripts in tests/browser). They need `npm ci` in tests/browser and
//! a Chromium (`apt-get install chromium`, or CHROMIUM_PATH); `.ci/run`
//! installs both. Without them a test is skipped on a developer's machine
//! and fails under CI.

use crate::support::{Engine, TestApp};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Command;

fn scripts() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser")
}

/// Whether the browser tooling is installed; under CI it must be.
fn ready() -> bool {
    let modules = scripts().join("node_modules/playwright-core").exists();
    let chromium = std::env::var_os("CHROMIUM_PATH").is_some()
        || [
            "/usr/bin/chromium",
            "/usr/bin/chromium-browser",
            "/usr/bin/google-chrome",
        ]
        .iter()
        .any(|p| Path::new(p).exists());
    let node = Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if modules && chromium && node {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI is set but the browser tests cannot run (node: {node}, tests/browser/node_modules: {modules}, chromium: {chromium})"
    );
    eprintln!("skipped: run `npm ci` in tests/browser and install chromium to run the browser tests");
    false
}

/// Runs `script` with `env`; panics with its output when it fails.
fn run_script(script: &str, env: &[(&str, String)]) {
    run_script_output(script, env);
}

/// Runs `script` with `env` and answers what it printed; panics with its
/// output when it fails.
fn run_script_output(script: &str, env: &[(&str, String)]) -> String {
    let out = Command::new("node")
        .arg(scripts().join(script))
        .current_dir(scripts())
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .expect("run node");
    assert!(
        out.status.success(),
        "{script} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn development_mailbox_in_a_browser() {
    if !ready() {
        return;
    }
    let app = TestApp::start(Engine::Sqlite).expect("sqlite app");
    let t = app.bootstrap();
    t.post(
        "/v2/transactions",
        json!({ "transaction": { "action": "sale", "payment_method": "cc", "transaction_amount": "8.40",
            "account_number": "4111111111111111", "exp_date": "1239",
            "notification_email_address": "pat@example.com" } }),
    )
    .expect(201);
    let subject = t.get("/dev/mail?format=json").expect(200).body["messages"][0]["subject"]
        .as_str()
        .expect("a message")
        .to_string();
    run_script(
        "devmail.mjs",
        &[
            ("BASE", app.base.clone()),
            ("DEVELOPER_ID", t.cred("developer_id")),
            ("USER_ID", t.cred("user_id")),
            ("API_KEY", t.cred("user_api_key")),
            ("SUBJECT", subject),
        ],
    );
}

#[test]
fn hosted_forms_in_a_browser() {
    if !ready() {
        return;
    }
    let app = TestApp::start(Engine::Sqlite).expect("sqlite app");
    let t = app.bootstrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let sale = |api_id: &str, amount: &str, extra: serde_json::Value| {
        let mut tx = json!({ "payment_method": "cc", "action": "sale", "transaction_amount": amount,
            "transaction_api_id": api_id });
        tx.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        json!({ "transaction": tx })
    };
    // Each link signed at its own second: a hash-key opens one form.
    let link =
        |path: &str, ago: i64, data: &serde_json::Value| crate::hosted::form_link(&t, path, now - ago, data);
    let embedded = link(
        "/v2/payform",
        1,
        &sale(
            "web-1",
            "13.00",
            json!({ "parent_send_message": true, "show_zip": true, "require_zip": true }),
        ),
    );
    let keyboard = link(
        "/v2/payform",
        2,
        &sale("web-2", "9.00", json!({ "show_cvv": false })),
    );
    let declined = link("/v2/payform", 3, &sale("web-3", "5.00", json!({})));
    let account = link(
        "/v2/accountform",
        4,
        &json!({ "accountvault": { "payment_method": "cc", "account_vault_api_id": "browservault1" } }),
    );
    let wrong_hash = {
        // A good link with the first hex digit of its hash-key changed.
        let good = link("/v2/payform", 5, &sale("web-5", "1.00", json!({})));
        let at = good.find("hash-key=").unwrap() + "hash-key=".len();
        let flipped = if &good[at..at + 1] == "0" { "1" } else { "0" };
        format!("{}{}{}", &good[..at], flipped, &good[at + 1..])
    };
    let expired = link("/v2/payform", 600, &sale("web-6", "1.00", json!({})));
    let printed = run_script_output(
        "hosted.mjs",
        &[
            ("BASE", app.base.clone()),
            ("EMBEDDED", embedded),
            ("KEYBOARD", keyboard),
            ("DECLINED", declined),
            ("ACCOUNT", account),
            ("WRONG_HASH", wrong_hash),
            ("EXPIRED", expired),
        ],
    );
    let seen: serde_json::Value = printed
        .lines()
        .find(|l| l.starts_with('{'))
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("no result line in {printed}"));
    // What the parent page received is the transaction the API finds by
    // its api id.
    assert_eq!(seen["embedded"]["api_id"], "web-1");
    let found = t
        .get("/v2/transactions?transaction_api_id=web-1")
        .expect(200)
        .body["transactions"]
        .clone();
    assert_eq!(found.as_array().map(Vec::len), Some(1));
    assert_eq!(found[0]["id"], seen["embedded"]["id"]);
    assert_eq!(found[0]["trx_source_id"], 9);
    let keyed = t
        .get("/v2/transactions?transaction_api_id=web-2")
        .expect(200)
        .body["transactions"][0]
        .clone();
    assert_eq!(
        (keyed["last_four"].as_str(), keyed["reason_code_id"].as_i64()),
        (Some("5454"), Some(1000))
    );
    let declined = t
        .get("/v2/transactions?transaction_api_id=web-3")
        .expect(200)
        .body["transactions"][0]
        .clone();
    assert_eq!(declined["reason_code_id"], 1500);
    let vault = t.get("/v2/accountvaults/browservault1?api_id=1").expect(200).body["accountvault"].clone();
    assert_eq!(vault["last_four"], "1881");
    for pan in ["4111111111111111", "5454545454545454", "4012888888881881"] {
        assert!(!app.log().contains(pan), "a card number reached the log");
    }
}

#[test]
fn quick_invoice_pay_page_in_a_browser() {
    if !ready() {
        return;
    }
    let app = TestApp::start(Engine::Sqlite).expect("sqlite app");
    let t = app.bootstrap();
    let invoice = |extra: serde_json::Value| {
        let mut q = json!({ "location_id": t.location_id(), "title": "Bakery order", "due_date": "2030-01-15",
            "item_list": { "Bread": "10.00", "Cake": "11.00" }, "email": "pat@example.com" });
        q.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        t.post("/v2/quickinvoices", json!({ "quickinvoice": q }))
            .expect(201)
            .body["quickinvoice"]
            .clone()
    };
    let full = invoice(json!({ "send_email": 1 }));
    // The link as the customer gets it: from the captured mail.
    let mail = t.get("/dev/mail?format=json").expect(200).body["messages"][0]["text"]
        .as_str()
        .expect("the invoice mail")
        .to_string();
    let at = mail.find("http").expect("a link in the mail");
    let link: String = mail[at..].chars().take_while(|c| !c.is_whitespace()).collect();
    assert!(link.contains("/quickinvoice/pay/"), "{link}");
    let partial = invoice(json!({ "allow_partial_pay": 1 }));
    run_script(
        "quickinvoice.mjs",
        &[
            ("BASE", app.base.clone()),
            ("FULL", link),
            (
                "PARTIAL",
                partial["_links"]["pay"]["href"].as_str().unwrap().to_string(),
            ),
        ],
    );
    let id = full["id"].as_str().unwrap();
    let paid = t.get(&format!("/v2/quickinvoices/{id}")).expect(200).body["quickinvoice"].clone();
    assert_eq!(
        (paid["status_id"].as_i64(), paid["payment_status_id"].as_i64()),
        (Some(0), Some(2))
    );
    let id = partial["id"].as_str().unwrap();
    let part = t
        .get(&format!("/v2/quickinvoices/{id}?expand=transactions"))
        .expect(200)
        .body["quickinvoice"]
        .clone();
    assert_eq!(part["remaining_balance"], "17.00");
    assert_eq!(
        part["transactions"].as_array().map(Vec::len),
        Some(2),
        "the partial payment and the decline"
    );
}
