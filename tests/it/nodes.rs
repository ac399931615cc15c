//! Several `serve` processes on one PostgreSQL database: a node's
//! unfinished payments are reconciled by another node once it is dead,
//! and never while it lives.

use crate::support::{Engine, Tenant, TestApp, BIN};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A second server process on the test app's database.
struct Node {
    child: Child,
    base: String,
}

impl Node {
    fn start(app: &TestApp) -> Node {
        let log = std::fs::File::create(app.dir.join("node-b.log")).expect("log file");
        let mut child = Command::new(BIN)
            .arg("serve")
            .env("FERROGATE_DATABASE_URL", &app.database_url)
            .env("FERROGATE_LISTEN", "127.0.0.1:0")
            .env("FERROGATE_DATA_KEY", &app.data_key)
            .env("FERROGATE_DB_POOL", "4")
            .env_remove("FERROGATE_PUBLIC_URL")
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .spawn()
            .expect("start the second node");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("listening line");
        let base = line.trim().trim_start_matches("listening on ").to_string();
        Node { child, base }
    }

    fn tenant(&self, t: &Tenant) -> Tenant {
        let mut other = t.clone();
        other.base = self.base.clone();
        other
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn delayed_sale(t: &Tenant, api_id: &str) -> std::thread::JoinHandle<u16> {
    let t = t.clone();
    let body = json!({ "transaction": { "action": "sale", "payment_method": "cc",
        "account_number": "4111111111111111", "exp_date": "1239",
        "transaction_amount": "8.05", "transaction_api_id": api_id } });
    std::thread::spawn(move || t.post("/v2/transactions", body).status)
}

/// The transaction with this api id as `t` sees it, once it exists.
fn by_api_id(t: &Tenant, api_id: &str) -> Option<Value> {
    let r = t
        .get(&format!("/v2/transactions?transaction_api_id={api_id}"))
        .expect(200);
    r.body["transactions"].as_array().and_then(|a| a.first().cloned())
}

fn wait_for(what: &str, limit: Duration, mut f: impl FnMut() -> Option<Value>) -> Value {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < limit, "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_dead_nodes_pending_sale_is_reversed_by_another_node() {
    let Some(mut app) = TestApp::start(Engine::Postgres) else {
        eprintln!("skipped: FERROGATE_TEST_DATABASE_URL is not set");
        return;
    };
    {
        let t = app.bootstrap();
        let node_b = Node::start(&app);
        let b = node_b.tenant(&t);
        let client = delayed_sale(&t, "two-node-1");
        // The sale is stored as pending before the processor is called.
        let pending = wait_for("the pending sale", Duration::from_secs(5), || {
            by_api_id(&b, "two-node-1").filter(|tx| tx["status_id"].is_null())
        });
        assert_eq!(pending["verbiage"], "Processing");
        app.kill();
        // The client's connection died with the node (the request helper
        // panics on a transport error): it never saw a 201.
        assert!(
            !matches!(client.join(), Ok(201)),
            "the client never got an answer"
        );
        // Node B sees node A's lock gone and reverses the sale.
        let done = wait_for("the reconciled sale", Duration::from_secs(30), || {
            by_api_id(&b, "two-node-1").filter(|tx| !tx["status_id"].is_null())
        });
        assert_eq!(done["status_id"], 301, "{done}");
        assert_eq!(done["reason_code_id"], 1531, "{done}");
        assert_eq!(done["verbiage"], "Interrupted");
        assert!(done["batch"].is_null(), "a reversed sale never enters a batch");
        // The api id stays taken: a retry needs a new one, and is served.
        let retry = b.post(
            "/v2/transactions",
            json!({ "transaction": { "action": "sale", "payment_method": "cc",
                "account_number": "4111111111111111", "exp_date": "1239",
                "transaction_amount": "8.05", "transaction_api_id": "two-node-1" } }),
        );
        assert_eq!(retry.status, 422, "{}", retry.text);
        assert!(!retry.errors("transaction_api_id").is_empty());
    }
}

#[test]
fn a_live_nodes_pending_sale_is_left_alone() {
    let Some(app) = TestApp::start(Engine::Postgres) else {
        eprintln!("skipped: FERROGATE_TEST_DATABASE_URL is not set");
        return;
    };
    {
        let t = app.bootstrap();
        let client = delayed_sale(&t, "two-node-2");
        wait_for("the pending sale", Duration::from_secs(5), || {
            by_api_id(&t, "two-node-2").filter(|tx| tx["status_id"].is_null())
        });
        // Node B starts (and reconciles) while node A still waits on the
        // processor: A's lock is held, so B must not touch the sale.
        let node_b = Node::start(&app);
        assert_eq!(client.join().unwrap(), 201);
        let b = node_b.tenant(&t);
        let done = by_api_id(&b, "two-node-2").expect("the sale");
        // $8.05 is the sandbox's 5-second delayed decline, not a reversal.
        assert_eq!(done["status_id"], 301, "{done}");
        assert_eq!(done["reason_code_id"], 1500, "{done}");
        assert_eq!(done["verbiage"], "DELAYED");
    }
}
