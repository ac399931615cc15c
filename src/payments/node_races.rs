//! Races between nodes on one database, driven step by step: a node that
//! another took for dead (its lock was free: here it never held one, as
//! when its lock connection dropped) and goes on completing what it
//! began, while the other's reconciler works on the same rows. A gate in
//! front of the sandbox processor holds chosen calls until the test lets
//! them go, so each interleaving is exact. On SQLite, and on PostgreSQL
//! when FERROGATE_TEST_DATABASE_URL names a server (required in CI).

use super::{actions, reconcile, FollowUp, NewPayment, Origin, Payments, TransactionId};
use crate::bootstrap::Credentials;
use crate::clock::Clock;
use crate::crypto::Keyring;
use crate::db::{Sql, Store, Value};
use crate::engine::events::NoSink;
use crate::engine::query::location_scope;
use crate::engine::Cx;
use crate::error::{ApiError, ApiResult};
use crate::processor::*;
use serde_json::{json, Value as Json};
use std::collections::VecDeque;
use std::sync::{mpsc, Arc, Mutex};

/// The sandbox, with calls of chosen kinds held: each [`Gate::hold`]
/// holds the next call of its kind, says when it arrived and lets it go
/// when told.
#[derive(Default)]
struct Gate {
    sandbox: SandboxProcessor,
    holds: Mutex<VecDeque<(&'static str, Held)>>,
    /// The gateway ids reversed, in order.
    reversed: Mutex<Vec<String>>,
}

struct Held {
    arrived: tokio::sync::mpsc::UnboundedSender<()>,
    go: mpsc::Receiver<()>,
}

/// The test's end of a held call.
struct Hold {
    arrived: tokio::sync::mpsc::UnboundedReceiver<()>,
    go: mpsc::Sender<()>,
}

impl Hold {
    /// Waits until the held call reaches the processor.
    async fn arrived(&mut self) {
        self.arrived.recv().await.expect("the held call arrived");
    }

    /// Lets the held call through.
    fn release(&self) {
        self.go.send(()).expect("the held call waits");
    }
}

impl Gate {
    fn hold(&self, kind: &'static str) -> Hold {
        let (arrived_tx, arrived) = tokio::sync::mpsc::unbounded_channel();
        let (go, go_rx) = mpsc::channel();
        self.holds.lock().unwrap().push_back((
            kind,
            Held {
                arrived: arrived_tx,
                go: go_rx,
            },
        ));
        Hold { arrived, go }
    }

    /// Holds the call if a hold of its kind is waiting for one.
    fn pass(&self, kind: &'static str) {
        let held = {
            let mut holds = self.holds.lock().unwrap();
            let at = holds.iter().position(|(k, _)| *k == kind);
            at.and_then(|i| holds.remove(i)).map(|(_, held)| held)
        };
        if let Some(held) = held {
            held.arrived.send(()).expect("the test waits for the call");
            held.go.recv().expect("the test lets the call go");
        }
    }
}

impl Processor for Gate {
    fn name(&self) -> &'static str {
        "gate"
    }
    fn authorize(&self, req: &AuthorizeRequest) -> ProcessorResult {
        self.pass("authorize");
        self.sandbox.authorize(req)
    }
    fn capture(&self, req: &CaptureRequest) -> ProcessorResult {
        self.sandbox.capture(req)
    }
    fn increment(&self, req: &IncrementRequest) -> ProcessorResult {
        self.sandbox.increment(req)
    }
    fn void(&self, req: &VoidRequest) -> ProcessorResult {
        self.pass("void");
        self.sandbox.void(req)
    }
    fn partial_reversal(&self, req: &PartialReversalRequest) -> ProcessorResult {
        self.sandbox.partial_reversal(req)
    }
    fn refund(&self, req: &RefundRequest) -> ProcessorResult {
        self.sandbox.refund(req)
    }
    fn credit(&self, req: &CreditRequest) -> ProcessorResult {
        self.sandbox.credit(req)
    }
    fn ach_debit(&self, req: &AchRequest) -> ProcessorResult {
        self.sandbox.ach_debit(req)
    }
    fn ach_credit(&self, req: &AchRequest) -> ProcessorResult {
        self.sandbox.ach_credit(req)
    }
    fn avs_only(&self, req: &AvsOnlyRequest) -> ProcessorResult {
        self.sandbox.avs_only(req)
    }
    fn force(&self, req: &ForceRequest) -> ProcessorResult {
        self.sandbox.force(req)
    }
    fn reverse(&self, req: &ReversalRequest) -> ProcessorResult {
        self.reversed.lock().unwrap().push(req.gateway_id.clone());
        self.pass("reverse");
        self.sandbox.reverse(req)
    }
    fn settle(&self, req: &SettleRequest) -> ProcessorResult<SettleResponse> {
        self.pass("settle");
        self.sandbox.settle(req)
    }
}

/// One database with a tenant, and nodes serving it.
struct Bench {
    store: Store,
    gate: Arc<Gate>,
    clock: Clock,
    creds: Credentials,
    cx: Cx,
    /// Drops the database (PostgreSQL) or removes its files (SQLite).
    cleanup: Option<Box<dyn FnOnce()>>,
}

impl Drop for Bench {
    fn drop(&mut self) {
        self.store.shutdown();
        if let Some(cleanup) = self.cleanup.take() {
            cleanup();
        }
    }
}

impl Bench {
    /// A node of this database (its own random node id, no node lock: to
    /// the others it looks dead).
    fn node(&self) -> Payments {
        Payments::new(
            self.store.clone(),
            self.gate.clone(),
            Arc::new(keyring()),
            self.clock.clone(),
            Arc::new(NoSink),
        )
    }

    fn now(&self) -> i64 {
        self.clock.now_ts()
    }

    /// A card sale at the tenant's location (not yet sent).
    fn sale(&self, amount: &str) -> NewPayment {
        let body = json!({ "action": "sale", "payment_method": "cc", "transaction_amount": amount,
            "account_number": "4111111111111111", "exp_date": "1239",
            "product_transaction_id": self.creds.cc_product_transaction_id });
        NewPayment {
            input: actions::parse(body.as_object().unwrap(), false).unwrap(),
            origin: Origin::api(),
            idempotency: None,
        }
    }

    /// A PUT action on `id`.
    fn action(&self, id: &str, body: Json) -> FollowUp {
        FollowUp {
            transaction: TransactionId::new(id),
            input: actions::parse(body.as_object().unwrap(), true).unwrap(),
            idempotency: None,
        }
    }

    /// Columns of the transaction `id`, as stored.
    async fn row(&self, id: &str, columns: &str) -> Vec<Value> {
        let sql = Sql::with(
            &format!("SELECT {columns} FROM transactions WHERE id = ?"),
            vec![id.into()],
        );
        self.store
            .read(move |c| Ok(c.query_one(&sql)?.expect("the transaction")))
            .await
            .unwrap()
    }

    /// One statement, as another node or process would send it.
    async fn exec(&self, sql: &str, params: Vec<Value>) -> u64 {
        let sql = Sql::with(sql, params);
        self.store.write(move |c| Ok(c.execute(&sql)?)).await.unwrap()
    }
}

fn keyring() -> Keyring {
    Keyring::new(&[7; 32], &[])
}

/// A fresh database with a tenant on each engine at hand.
fn benches() -> Vec<Bench> {
    let mut benches = Vec::new();
    let path = std::env::temp_dir().join(format!("ferrogate-races-{}.db", crate::ids::new_id()));
    let store = Store::open(&format!("sqlite://{}", path.display()), 2).unwrap();
    let cleanup = move || {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
    };
    benches.push(bench(store, Box::new(cleanup)));
    match std::env::var("FERROGATE_TEST_DATABASE_URL") {
        Ok(url) => {
            let name = format!("fg_races_{}", crate::ids::new_id());
            let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
            admin.batch_execute(&format!("CREATE DATABASE {name}")).unwrap();
            let (base, _) = url.rsplit_once('/').unwrap();
            let store = Store::open(&format!("{base}/{name}"), 4).unwrap();
            let cleanup = move || {
                let _ = admin.batch_execute(&format!("DROP DATABASE {name} WITH (FORCE)"));
            };
            benches.push(bench(store, Box::new(cleanup)));
        }
        Err(_) => assert!(
            std::env::var("CI").is_err(),
            "CI runs need FERROGATE_TEST_DATABASE_URL"
        ),
    }
    benches
}

fn bench(store: Store, cleanup: Box<dyn FnOnce()>) -> Bench {
    store.migrate().unwrap();
    let clock = Clock::system();
    let creds = crate::bootstrap::run(&store, Arc::new(keyring()), None, clock.now_ts()).unwrap();
    let location = creds.location_id.clone();
    let scope = store
        .write_blocking(move |c| Ok(location_scope(c, &location)?.expect("the location")))
        .unwrap();
    let cx = Cx {
        user_id: creds.user_id.clone(),
        scope,
        now: clock.now_ts(),
        outbound: Default::default(),
        keyring: Arc::new(keyring()),
        public_url: Arc::from(""),
        perms: Arc::new(crate::auth::Perms {
            admin: true,
            ..Default::default()
        }),
        sink: Arc::new(NoSink),
        user_receipts: None,
        epoch: None,
    };
    Bench {
        store,
        gate: Arc::default(),
        clock,
        creds,
        cx,
        cleanup: Some(cleanup),
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap()
}

fn is_interrupted<T: std::fmt::Debug>(result: &ApiResult<T>) -> bool {
    matches!(result, Err(ApiError::Unavailable(m)) if m.contains("interrupted"))
}

/// A sale whose node was taken for dead while its processor call ran:
/// the reconciler claims the row before it reverses it, so the node's
/// completion, arriving between the reversal and the decline, records
/// nothing (503, interrupted) and the sale ends declined as reversed.
/// Before, the completion recorded the processor's approval after the
/// reversal had been sent: approved in the books, reversed at the
/// processor.
#[test]
fn a_sale_reversed_by_a_reconciler_is_never_recorded_approved() {
    for bench in benches() {
        runtime().block_on(async {
            let (node, reconciler) = (bench.node(), bench.node());
            let mut authorizing = bench.gate.hold("authorize");
            let sale = tokio::spawn(node.create(bench.cx.clone(), bench.sale("10.00")));
            authorizing.arrived().await;
            let id = bench
                .row_of_pending()
                .await
                .expect("the sale is stored pending before the processor call");

            let mut reversing = bench.gate.hold("reverse");
            let pass = {
                let (reconciler, now) = (reconciler.clone(), bench.now());
                tokio::spawn(async move { reconcile::run_once(&reconciler, now).await })
            };
            reversing.arrived().await;
            // The processor approves; the node completes while the
            // reversal is under way.
            authorizing.release();
            let answer = sale.await.unwrap();
            assert!(is_interrupted(&answer), "{answer:?}");
            reversing.release();
            let report = pass.await.unwrap().unwrap();
            assert_eq!(report.reversed, 1, "{report:?}");

            assert_eq!(*bench.gate.reversed.lock().unwrap(), std::slice::from_ref(&id));
            let row = bench
                .row(&id, "state, status_id, reason_code_id, pending_node")
                .await;
            assert_eq!(
                row,
                [
                    Value::from("done"),
                    Value::Int(301),
                    Value::Int(1531),
                    Value::Null
                ],
                "reversed, so declined"
            );
        });
    }
}

/// A reconciler clears only the mark of the node it found dead. Another
/// reconciler may have cleared that mark already, and a live node marked
/// the transaction again for an action now at the processor: that mark
/// stays. Before, the mark was cleared by transaction id alone, and a
/// settle or a second action could then run beside the live one.
#[test]
fn a_reconciler_clears_only_the_dead_nodes_mark() {
    for bench in benches() {
        runtime().block_on(async {
            let node = bench.node();
            let mut ids = Vec::new();
            for amount in ["10.00", "11.00"] {
                let reply = node.create(bench.cx.clone(), bench.sale(amount)).await.unwrap();
                ids.push(reply.transaction()["id"].as_str().unwrap().to_string());
            }
            let (pending, marked) = (&ids[0], &ids[1]);
            // A node that died left a sale pending and a void's mark; the
            // pending one is older, so a pass takes it first.
            let now = bench.now();
            bench.exec(
                "UPDATE transactions SET state = 'pending', pending_node = 'node-gone', status_id = NULL, \
                 modified_ts = ? WHERE id = ?",
                vec![(now - 20).into(), pending.as_str().into()],
            ).await;
            bench.exec(
                "UPDATE transactions SET pending_action = 'void', pending_node = 'node-gone', modified_ts = ? \
                 WHERE id = ?",
                vec![(now - 10).into(), marked.as_str().into()],
            ).await;

            let reconciler = bench.node();
            let mut reversing = bench.gate.hold("reverse");
            let pass = {
                let (reconciler, now) = (reconciler.clone(), bench.now());
                tokio::spawn(async move { reconcile::run_once(&reconciler, now).await })
            };
            // This pass has read both rows and is reversing the first.
            reversing.arrived().await;
            let left = bench.row(marked, "pending_node").await;
            assert_eq!(left, [Value::from("node-gone")], "the mark is still there");
            // Meanwhile another reconciler clears the dead node's mark and
            // a live node marks the transaction for its own void.
            bench.exec(
                "UPDATE transactions SET pending_action = 'void', pending_node = 'node-live' WHERE id = ?",
                vec![marked.as_str().into()],
            ).await;
            reversing.release();
            let report = pass.await.unwrap().unwrap();
            assert_eq!((report.reversed, report.unmarked), (1, 0), "{report:?}");
            assert_eq!(
                bench.row(marked, "pending_action, pending_node").await,
                [Value::from("void"), Value::from("node-live")],
                "the live node's mark stays"
            );
        });
    }
}

/// An action's completion clears only its own node's mark. A node taken
/// for dead has its void's mark cleared by a reconciler, and another node
/// marks the transaction for a void of its own; when the first node's
/// processor answers, its completion finds its mark gone (503,
/// interrupted) and leaves the other's alone, which then completes.
/// Before, the first completion cleared the other node's mark (the same
/// action name) and recorded its void, and the other answered 503 though
/// its call had gone through.
#[test]
fn an_action_completes_only_on_its_own_mark() {
    for bench in benches() {
        runtime().block_on(async {
            let (first, second) = (bench.node(), bench.node());
            let reply = first.create(bench.cx.clone(), bench.sale("12.00")).await.unwrap();
            let id = reply.transaction()["id"].as_str().unwrap().to_string();
            let void = json!({ "action": "void" });

            let mut first_void = bench.gate.hold("void");
            let first_answer = tokio::spawn(first.update(bench.cx.clone(), bench.action(&id, void.clone())));
            first_void.arrived().await;
            // Another node's reconciler takes the first node for dead.
            let report = reconcile::run_once(&second, bench.now()).await.unwrap();
            assert_eq!(report.unmarked, 1, "{report:?}");

            let mut second_void = bench.gate.hold("void");
            let second_answer = tokio::spawn(second.update(bench.cx.clone(), bench.action(&id, void)));
            second_void.arrived().await;
            first_void.release();
            let first_answer = first_answer.await.unwrap();
            assert!(is_interrupted(&first_answer), "{first_answer:?}");
            assert_eq!(
                bench.row(&id, "pending_action").await,
                [Value::from("void")],
                "the second node's mark stays"
            );
            second_void.release();
            let second_answer = second_answer.await.unwrap().expect("the second void");
            assert_eq!(second_answer.transaction()["status_id"], 201);
            assert_eq!(
                bench.row(&id, "status_id, pending_action, pending_node").await,
                [Value::Int(201), Value::Null, Value::Null]
            );
        });
    }
}

impl Bench {
    /// The id of the one pending transaction, if there is one.
    async fn row_of_pending(&self) -> Option<String> {
        self.store
            .read(|c| {
                Ok(
                    c.query_one(&Sql::new("SELECT id FROM transactions WHERE state = 'pending'"))?
                        .and_then(|r| r[0].as_str().map(str::to_string)),
                )
            })
            .await
            .unwrap()
    }
}
