//! Several `serve` processes on one PostgreSQL database: a node's
//! unfinished payments are reconciled by another node once it is dead,
//! and never while it lives.

use crate::support::wait::wait_until;
use crate::support::{Engine, Tenant, TestApp, BIN};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A second server process on the test app's database.
pub struct Node {
    child: Child,
    base: String,
}

impl Node {
    pub fn start(app: &TestApp) -> Node {
        let log = std::fs::File::create(app.dir.join("node-b.log")).expect("log file");
        let mut child = Command::new(BIN)
            .arg("serve")
            .env("FERROGATE_DATABASE_URL", &app.database_url)
            .env("FERROGATE_LISTEN", "127.0.0.1:0")
            .env("FERROGATE_DATA_KEY", &app.data_key)
            .env("FERROGATE_DB_POOL", "4")
            .env("FERROGATE_POSTBACK_ALLOW_PRIVATE", "1")
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

    pub fn tenant(&self, t: &Tenant) -> Tenant {
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

#[test]
fn a_dead_nodes_pending_sale_is_reversed_by_another_node() {
    let Some(mut app) = TestApp::start(Engine::Postgres) else {
        crate::support::no_postgres();
        return;
    };
    {
        let t = app.bootstrap();
        let node_b = Node::start(&app);
        let b = node_b.tenant(&t);
        let client = delayed_sale(&t, "two-node-1");
        // The sale is stored as pending before the processor is called.
        let pending = wait_until("the pending sale", Duration::from_secs(5), || {
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
        let done = wait_until("the reconciled sale", Duration::from_secs(30), || {
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
        crate::support::no_postgres();
        return;
    };
    {
        let t = app.bootstrap();
        let client = delayed_sale(&t, "two-node-2");
        wait_until("the pending sale", Duration::from_secs(5), || {
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

/// Two nodes share the postback outbox: each event is delivered once, and
/// an event leased by a node that is killed mid-delivery is delivered by
/// the other.
#[test]
fn postbacks_are_shared_by_nodes_and_survive_the_lease_holder() {
    use crate::support::receiver::{config, wait_log, Receiver, Reply};
    let Some(mut app) = TestApp::start(Engine::Postgres) else {
        crate::support::no_postgres();
        return;
    };
    let t = app.bootstrap();
    let rx = Receiver::start("/two-nodes");
    let c = config(
        &t,
        json!({ "resource": "contact", "url": rx.url, "on_update": 0, "on_delete": 0,
            "number_of_attempts": 5, "attempt_interval": 1 }),
    );
    let config_id = c["id"].as_str().unwrap().to_string();
    let b = Node::start(&app);
    let tb = b.tenant(&t);
    let mut ids = Vec::new();
    for i in 0..120 {
        let via = if i % 2 == 0 { &t } else { &tb };
        ids.push(via.contact(json!({}))["id"].as_str().unwrap().to_string());
    }
    rx.wait_for(ids.len(), Duration::from_secs(30));
    // Once every delivery is recorded as delivered, no send can start.
    let delivered = || {
        let r = t
            .get(&format!(
                "/v2/postbackconfigs/{config_id}/deliveries?status=delivered&page_size=1"
            ))
            .expect(200);
        (r.body["meta"]["pagination"]["totalCount"].as_u64() == Some(ids.len() as u64)).then_some(Value::Null)
    };
    wait_until("every delivery recorded", Duration::from_secs(30), delivered);
    let mut seen: Vec<String> = rx
        .received()
        .iter()
        .map(|r| r.data()["id"].as_str().unwrap().to_string())
        .collect();
    seen.sort();
    let mut expected = ids.clone();
    expected.sort();
    assert_eq!(
        seen, expected,
        "each event delivered exactly once by the two nodes"
    );

    // Node A alone holds the lease of a delivery its receiver never answers.
    drop(b);
    let mut first = true;
    rx.answer(move |_| {
        if std::mem::take(&mut first) {
            Reply::Hang
        } else {
            Reply::Status(200)
        }
    });
    let id = t.contact(json!({}))["id"].as_str().unwrap().to_string();
    rx.wait_for(ids.len() + 1, Duration::from_secs(10));
    let b = Node::start(&app);
    let tb = b.tenant(&t);
    app.kill();
    let got = rx.wait_for(ids.len() + 2, Duration::from_secs(15));
    assert_eq!(got.last().unwrap().data()["id"], id.as_str());
    wait_log(&tb, &config_id, Duration::from_secs(10), |log| {
        log.iter()
            .any(|d| d["record_id"] == id.as_str() && d["status"] == "delivered")
    });
}
