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
