//! Payment safety: Idempotency-Key replays (also under concurrency), no
//! charge left pending by a SIGKILL mid-flight, velocity limits of a
//! product transaction, and a settlement interrupted by a crash.

use crate::engine_tests;
use crate::support::db::{db, wait_for_lock_wait, Db};
use crate::support::wait::wait_until;
use crate::support::{str_of, Client, Engine, Resp, Tenant, TestApp};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

engine_tests!(
    idempotency_key_replays,
    idempotency_key_concurrent_repeats,
    idempotency_keys_per_user_and_on_put,
    sigkill_leaves_nothing_pending,
    velocity_limits_decline,
    hold_days,
    interrupted_settlement_is_reprocessed,
    a_settle_and_a_void_never_overlap,
    a_sale_moved_to_the_next_batch_says_so_everywhere,
    a_sale_reversed_while_completing_is_not_counted,
    sales_of_one_batch_do_not_wait_for_its_row,
    a_batch_opened_by_another_writer_takes_sales,
    a_sale_whose_batch_is_gone_finds_an_open_one,
    what_a_sale_reads_follows_changes_made_behind_its_back,
    a_sale_whose_client_disconnects_is_recorded,
    a_stopping_server_finishes_the_payments_it_began,
    one_action_at_a_time_on_a_transaction,
    an_action_checks_the_row_as_it_is_when_it_marks_it,
    an_api_id_claimed_twice_is_refused_before_the_processor,
);

/// A future MMYY.
fn exp() -> String {
    let now = chrono::Utc::now();
    format!("12{:02}", (chrono::Datelike::year(&now) + 2) % 100)
}

/// A keyed card sale of `amount` with extra fields.
fn sale(amount: &str, extra: Value) -> Value {
    let mut tx = json!({ "action": "sale", "payment_method": "cc", "transaction_amount": amount,
        "account_number": "4111111111111111", "exp_date": exp() });
    for (k, v) in extra.as_object().unwrap() {
        tx[k] = v.clone();
    }
    json!({ "transaction": tx })
}

fn ach(action: &str, t: &Tenant, amount: &str, sec_code: &str) -> Value {
    json!({ "transaction": { "action": action, "payment_method": "ach", "transaction_amount": amount,
        "product_transaction_id": t.cred("ach_product_transaction_id"), "ach_sec_code": sec_code,
        "routing": "072000326", "account_number": "123456789012", "account_type": "checking",
        "account_holder_name": "Jane Doe" } })
}

fn refund(of: &str, amount: &str) -> Value {
    json!({ "transaction": { "action": "refund", "payment_method": "cc",
        "previous_transaction_id": of, "transaction_amount": amount } })
}

fn auth(t: &Tenant) -> Vec<(String, String)> {
    ["developer_id", "user_id", "user_api_key"]
        .iter()
        .map(|k| (k.replace('_', "-"), t.cred(k)))
        .collect()
}

/// A request with an `Idempotency-Key` header.
fn keyed(t: &Tenant, method: &str, path: &str, key: &str, body: &Value) -> Resp {
    let mut headers = auth(t);
    headers.push(("idempotency-key".into(), key.into()));
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    Client { base: t.base.clone() }.send(method, path, &headers, Some(&body.to_string()))
}

/// Like `Tenant::post`, but a dead server is `None` instead of a panic.
fn try_post(t: &Tenant, path: &str, key: Option<&str>, body: &Value) -> Option<Resp> {
    let agent = ureq::AgentBuilder::new().timeout(Duration::from_secs(30)).build();
    let mut req = agent
        .post(&format!("{}{}", t.base, path))
        .set("content-type", "application/json");
    for (k, v) in auth(t) {
        req = req.set(&k, &v);
    }
    if let Some(key) = key {
        req = req.set("idempotency-key", key);
    }
    let resp = match req.send_string(&body.to_string()) {
        Ok(r) => r,
        Err(ureq::Error::Status(_, r)) => r,
        Err(_) => return None,
    };
    let status = resp.status();
    let text = resp.into_string().unwrap_or_default();
    Some(Resp {
        status,
        body: serde_json::from_str(&text).unwrap_or(Value::Null),
        text,
        headers: Vec::new(),
    })
}

fn tx_id(r: &Resp) -> String {
    str_of(&r.body["transaction"]["id"])
}

/// How many transactions the tenant sees.
fn count(t: &Tenant) -> u64 {
    t.get("/v2/transactions").expect(200).body["meta"]["pagination"]["totalCount"]
        .as_u64()
        .unwrap()
}

fn replayed(r: &Resp) -> bool {
    r.header("idempotent-replayed") == Some("true")
}

/// Same key, same request: the first answer again, no second charge.
/// Same key, another request: 422. A refusal is kept like a success.
fn idempotency_key_replays(app: &TestApp) {
    let t = app.bootstrap();
    let body = sale("10.00", json!({ "description": "order 1001" }));
    let first = keyed(&t, "POST", "/v2/transactions", "order-1001", &body).expect(201);
    assert!(!replayed(&first), "a first answer is not a replay");
    assert_eq!(first.body["transaction"]["status_id"], 101);
    let again = keyed(&t, "POST", "/v2/transactions", "order-1001", &body).expect(201);
    assert!(replayed(&again), "headers: {:?}", again.headers);
    assert_eq!(tx_id(&again), tx_id(&first));
    assert_eq!(again.body["transaction"], first.body["transaction"]);
    assert_eq!(count(&t), 1, "one charge for two requests with one key");

    // The same key with another amount, or on another endpoint: refused.
    let other = sale("10.01", json!({ "description": "order 1001" }));
    let r = keyed(&t, "POST", "/v2/transactions", "order-1001", &other).expect(422);
    assert!(!r.errors("idempotency_key").is_empty(), "{}", r.text);
    let path = format!("/v2/transactions/{}", tx_id(&first));
    let r = keyed(
        &t,
        "PUT",
        &path,
        "order-1001",
        &json!({ "transaction": { "action": "void" } }),
    )
    .expect(422);
    assert!(!r.errors("idempotency_key").is_empty(), "{}", r.text);
    assert_eq!(
        t.get(&path).expect(200).body["transaction"]["status_id"],
        101,
        "not voided"
    );
    assert_eq!(count(&t), 1);

    // A validation refusal is replayed as such, and pins the key.
    let bad = sale("0", json!({}));
    let r = keyed(&t, "POST", "/v2/transactions", "order-1002", &bad).expect(422);
    assert!(!r.errors("transaction_amount").is_empty(), "{}", r.text);
    let r2 = keyed(&t, "POST", "/v2/transactions", "order-1002", &bad).expect(422);
    assert!(replayed(&r2), "the 422 is a replay: {:?}", r2.headers);
    assert_eq!(r2.body["errors"], r.body["errors"]);
    // Like every error body, the replay carries its own request's id.
    assert_eq!(
        r2.body["request_id"].as_str(),
        r2.header("x-request-id"),
        "{}",
        r2.text
    );
    assert_ne!(r2.body["request_id"], r.body["request_id"]);
    let fixed = sale("10.00", json!({}));
    let r3 = keyed(&t, "POST", "/v2/transactions", "order-1002", &fixed).expect(422);
    assert!(!r3.errors("idempotency_key").is_empty(), "{}", r3.text);
    assert_eq!(count(&t), 1);

    // An unusable key is refused before anything runs.
    for key in ["x".repeat(256), "two words".to_string()] {
        let r = keyed(&t, "POST", "/v2/transactions", &key, &fixed);
        assert_eq!(r.status, 400, "key {key:?}: {}", r.text);
    }
    assert_eq!(count(&t), 1);

    // Without a key the same body is a second charge (the count can move).
    t.post("/v2/transactions", body.clone()).expect(201);
    t.post("/v2/transactions", body).expect(201);
    assert_eq!(count(&t), 3);
}

/// 16 requests with one key at once: one charge; each answer is that
/// charge or 409 (the first is still running). Several rounds, each with
/// its own key, so a lost race shows.
fn idempotency_key_concurrent_repeats(app: &TestApp) {
    let t = app.bootstrap();
    let body = sale("12.34", json!({}));
    let n = 16;
    let rounds = 6;
    for round in 0..rounds {
        let key = format!("race-{round}");
        let barrier = Arc::new(Barrier::new(n));
        let answers: Vec<Resp> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..n)
                .map(|_| {
                    let (t, body, barrier, key) = (t.clone(), body.clone(), barrier.clone(), key.clone());
                    s.spawn(move || {
                        barrier.wait();
                        keyed(&t, "POST", "/v2/transactions", &key, &body)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut ids = BTreeSet::new();
        for r in &answers {
            match r.status {
                201 => {
                    ids.insert(tx_id(r));
                }
                409 => assert!(!r.errors("idempotency_key").is_empty(), "{}", r.text),
                other => panic!("round {round}: answer {other}: {}", r.text),
            }
        }
        assert_eq!(
            ids.len(),
            1,
            "round {round}: exactly one transaction id answered: {ids:?}"
        );
        assert_eq!(count(&t), round + 1, "round {round}: one charge per key");
        let id = ids.into_iter().next().unwrap();
        let later = keyed(&t, "POST", "/v2/transactions", &key, &body).expect(201);
        assert!(replayed(&later));
        assert_eq!(tx_id(&later), id);
    }
    assert_eq!(count(&t), rounds);
}

/// Keys belong to their user; a PUT action is replayed too.
fn idempotency_keys_per_user_and_on_put(app: &TestApp) {
    let t = app.bootstrap();
    let (uid, key) = t.user(&t.location_id(), Some("132"));
    let other = t.as_user(&uid, &key);
    let mine = keyed(
        &t,
        "POST",
        "/v2/transactions",
        "shared",
        &sale("10.00", json!({})),
    )
    .expect(201);
    // Another user's request, even another one, is not refused or replayed.
    let theirs = keyed(
        &other,
        "POST",
        "/v2/transactions",
        "shared",
        &sale("11.00", json!({})),
    )
    .expect(201);
    assert!(!replayed(&theirs));
    assert_ne!(tx_id(&theirs), tx_id(&mine));
    assert_eq!(theirs.body["transaction"]["transaction_amount"], "11.00");
    let same = keyed(
        &other,
        "POST",
        "/v2/transactions",
        "shared",
        &sale("10.00", json!({})),
    )
    .expect(422);
    assert!(!same.errors("idempotency_key").is_empty(), "{}", same.text);
    // Another tenant may use it as well.
    let b = app.bootstrap();
    let r = keyed(
        &b,
        "POST",
        "/v2/transactions",
        "shared",
        &sale("10.00", json!({})),
    )
    .expect(201);
    assert!(!replayed(&r));
    assert_eq!(count(&t), 2);
    assert_eq!(count(&b), 1);

    // A void with a key: the repeat gets the same 200, the void runs once.
    let path = format!("/v2/transactions/{}", tx_id(&mine));
    let void = json!({ "transaction": { "action": "void" } });
    let first = keyed(&t, "PUT", &path, "void-1", &void).expect(200);
    assert_eq!(first.body["transaction"]["status_id"], 201);
    let again = keyed(&t, "PUT", &path, "void-1", &void).expect(200);
    assert!(replayed(&again), "headers: {:?}", again.headers);
    assert_eq!(again.body["transaction"], first.body["transaction"]);
    // Without the key it would run again (and be refused: already voided).
    let r = t.put(&path, void).expect(422);
    assert!(!r.errors("action").is_empty(), "{}", r.text);
}

/// Sets members of the product transaction's `velocity_settings`.
fn set_velocity(app: &TestApp, product_transaction_id: &str, members: Value) {
    let mut db = db(app);
    let text = db.text(
        "SELECT settings FROM product_transactions WHERE id = ?",
        &[product_transaction_id],
    );
    let mut settings: Value = serde_json::from_str(&text).unwrap();
    for (k, v) in members.as_object().unwrap() {
        settings["velocity_settings"][k] = v.clone();
    }
    let text = settings.to_string();
    assert_eq!(
        db.exec(
            "UPDATE product_transactions SET settings = ? WHERE id = ?",
            &[&text, product_transaction_id],
        ),
        1
    );
}

/// Asserts a 201 that recorded a velocity decline naming `setting`.
#[track_caller]
fn assert_velocity_decline(t: &Tenant, r: Resp, reason: i64, setting: &str) {
    let r = r.expect(201);
    let tx = &r.body["transaction"];
    assert_eq!(tx["status_id"], 301, "{}", r.text);
    assert_eq!(tx["reason_code_id"], reason, "{}", r.text);
    for field in ["verbiage", "response_message"] {
        let text = str_of(&tx[field]);
        assert!(
            text.contains("Velocity limit") && text.contains(setting),
            "{field} names {setting}: {text}"
        );
    }
    // Recorded as such, outside any batch.
    let stored = t.get(&format!("/v2/transactions/{}", tx_id(&r))).expect(200);
    assert_eq!(stored.body["transaction"]["status_id"], 301);
    assert_eq!(stored.body["transaction"]["transaction_batch_id"], Value::Null);
}

#[track_caller]
fn assert_approved(r: Resp, status: i64) -> String {
    let r = r.expect(201);
    assert_eq!(r.body["transaction"]["status_id"], status, "{}", r.text);
    tx_id(&r)
}

/// The stored transaction `tx`.
fn stored(t: &Tenant, tx: &str) -> Value {
    t.get(&format!("/v2/transactions/{tx}")).expect(200).body["transaction"].clone()
}

/// That batch `b` (as the API renders it) counts `count` transactions
/// totalling `total`.
#[track_caller]
fn assert_holds(b: &Value, count: impl Into<Value>, total: impl Into<Value>) {
    assert_eq!(
        (b["transaction_count"].clone(), b["total_amount"].clone()),
        (count.into(), total.into()),
        "{b}"
    );
}

/// The batch transaction `tx` is in.
#[track_caller]
fn batch_of(t: &Tenant, tx: &str) -> String {
    stored(t, tx)["transaction_batch_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{tx} has a batch"))
        .to_string()
}

fn settle_batch_of(t: &Tenant, tx: &str) {
    let batch = batch_of(t, tx);
    let r = t
        .post(&format!("/v2/transactionbatches/{batch}/settle"), json!({}))
        .expect(200);
    assert_eq!(
        r.body["transactionbatch"]["processing_status_id"], 2,
        "{}",
        r.text
    );
}

/// Each limit: the item that breaks it is recorded as declined (naming
/// the setting), the ones before pass, declined and voided items do not
/// count.
fn velocity_limits_decline(app: &TestApp) {
    let t = app.bootstrap();
    let cc = t.cred("cc_product_transaction_id");
    let post = |body: Value| t.post("/v2/transactions", body);

    // Largest item, in whole currency units.
    set_velocity(app, &cc, json!({ "debit_largest_item": 50 }));
    let big = assert_approved(post(sale("50.00", json!({}))), 101);
    assert_velocity_decline(&t, post(sale("50.01", json!({}))), 1619, "debit_largest_item");

    // Items per day: the declined 50.01 does not count, so one more passes.
    set_velocity(
        app,
        &cc,
        json!({ "debit_largest_item": 0, "debit_items_per_day": 2 }),
    );
    let ten = assert_approved(post(sale("10.00", json!({}))), 101);
    assert_velocity_decline(&t, post(sale("10.00", json!({}))), 1651, "debit_items_per_day");

    // Daily aggregate: 50 + 10 approved so far (declines not counted).
    set_velocity(
        app,
        &cc,
        json!({ "debit_items_per_day": 0, "debit_daily_aggregate": 100 }),
    );
    let forty = assert_approved(post(sale("40.00", json!({}))), 101);
    assert_velocity_decline(&t, post(sale("0.01", json!({}))), 1619, "debit_daily_aggregate");
    // A voided item frees its share.
    t.put(
        &format!("/v2/transactions/{forty}"),
        json!({ "transaction": { "action": "void" } }),
    )
    .expect(200);
    assert_approved(post(sale("40.00", json!({}))), 101);
    assert_velocity_decline(&t, post(sale("0.01", json!({}))), 1619, "debit_daily_aggregate");

    // Refunds per day (of settled sales); a refund is not a debit.
    set_velocity(app, &cc, json!({ "refund_items_per_day": 1 }));
    settle_batch_of(&t, &big);
    assert_approved(post(refund(&big, "1.00")), 111);
    let r = post(refund(&ten, "1.00"));
    assert_velocity_decline(&t, r, 1651, "refund_items_per_day");
    // The declined refund reserved nothing: the whole remainder is left.
    let r = post(refund(&ten, "10.01")).expect(422);
    assert!(
        r.errors("transaction_amount")
            .iter()
            .any(|m| m.contains("(10.00)")),
        "{}",
        r.text
    );

    // ACH credits per month, in whole units.
    let achpt = t.cred("ach_product_transaction_id");
    set_velocity(app, &achpt, json!({ "credit_monthly_aggregate": 30 }));
    let first = post(ach("credit", &t, "20.00", "CCD")).expect(201);
    assert_ne!(first.body["transaction"]["status_id"], 301, "{}", first.text);
    assert_velocity_decline(
        &t,
        post(ach("credit", &t, "10.01", "CCD")),
        1619,
        "credit_monthly_aggregate",
    );
    let last = post(ach("credit", &t, "10.00", "CCD")).expect(201);
    assert_ne!(last.body["transaction"]["status_id"], 301, "{}", last.text);
    // Debits are another class.
    let debit = post(ach("debit", &t, "100.00", "WEB")).expect(201);
    assert_ne!(debit.body["transaction"]["status_id"], 301, "{}", debit.text);
}

/// `refund_hold_days` refuses a refund of a too recent original;
/// `debit_hold_days` dates an ACH debit ahead.
fn hold_days(app: &TestApp) {
    let t = app.bootstrap();
    let cc = t.cred("cc_product_transaction_id");
    set_velocity(app, &cc, json!({ "refund_hold_days": 3 }));
    let original = assert_approved(t.post("/v2/transactions", sale("25.00", json!({}))), 101);
    settle_batch_of(&t, &original);
    let r = t.post("/v2/transactions", refund(&original, "5.00")).expect(422);
    assert!(
        r.errors("previous_transaction_id")
            .iter()
            .any(|m| m.contains("3 days")),
        "{}",
        r.text
    );
    // Four days later it may be refunded.
    let old = (chrono::Utc::now().timestamp() - 4 * 86_400).to_string();
    db(app).exec(
        &format!("UPDATE transactions SET created_ts = {old} WHERE id = ?"),
        &[&original],
    );
    assert_approved(t.post("/v2/transactions", refund(&original, "5.00")), 111);

    let achpt = t.cred("ach_product_transaction_id");
    set_velocity(app, &achpt, json!({ "debit_hold_days": 2 }));
    let r = t
        .post("/v2/transactions", ach("debit", &t, "20.00", "WEB"))
        .expect(201);
    let expected = (chrono::Utc::now() + chrono::Duration::days(2))
        .format("%Y-%m-%d")
        .to_string();
    assert_eq!(r.body["transaction"]["effective_date"], expected, "{}", r.text);
}

/// One client's sale: its transaction_api_id, amount and the answer it got
/// (`None`: the connection died with the server).
struct Sent {
    api_id: String,
    amount: String,
    key: Option<String>,
    answer: Option<Resp>,
}

/// SIGKILL while sales are in flight: after the restart every answered
/// sale is there as answered, nothing is left pending, the interrupted
/// ones are declined (301, reason 1531) after their reversal, a refund
/// left pending gives its reservation back, and an interrupted request's
/// Idempotency-Key may be retried.
fn sigkill_leaves_nothing_pending(app: &mut TestApp) {
    let t = app.bootstrap();
    // A settled sale and a full refund of it (made pending below, as a
    // crash between the two steps would leave it).
    let original = assert_approved(t.post("/v2/transactions", sale("20.00", json!({}))), 101);
    settle_batch_of(&t, &original);
    let refunded = assert_approved(t.post("/v2/transactions", refund(&original, "20.00")), 111);
    let r = t.post("/v2/transactions", refund(&original, "0.01")).expect(422);
    assert!(
        r.text.contains("refunded in full"),
        "nothing is left to refund: {}",
        r.text
    );

    let slow = 4;
    let fast_threads = 3;
    let fast_each = 20;
    let fast_done = AtomicUsize::new(0);
    let sent: Vec<Sent> = std::thread::scope(|s| {
        let mut handles = Vec::new();
        for i in 0..slow {
            let t = t.clone();
            handles.push(s.spawn(move || {
                // One of them carries a key (and no api id: the retry
                // below must be the very same request).
                let (api_id, key) = if i == 0 {
                    (None, Some("slow-key".to_string()))
                } else {
                    (Some(format!("slow-{i}")), None)
                };
                let extra = match &api_id {
                    Some(a) => json!({ "transaction_api_id": a }),
                    None => json!({ "description": "slow keyed" }),
                };
                let answer = try_post(&t, "/v2/transactions", key.as_deref(), &sale("8.03", extra));
                vec![Sent {
                    api_id: api_id.unwrap_or_default(),
                    amount: "8.03".into(),
                    key,
                    answer,
                }]
            }));
        }
        for w in 0..fast_threads {
            let t = t.clone();
            let fast_done = &fast_done;
            handles.push(s.spawn(move || {
                let mut out = Vec::new();
                for j in 0..fast_each {
                    let api_id = format!("fast-{w}-{j}");
                    let amount = format!("1.{:02}", w * fast_each + j);
                    let answer = try_post(
                        &t,
                        "/v2/transactions",
                        None,
                        &sale(&amount, json!({ "transaction_api_id": api_id })),
                    );
                    let dead = answer.is_none();
                    if answer.as_ref().is_some_and(|r| r.status == 201) {
                        fast_done.fetch_add(1, Ordering::SeqCst);
                    }
                    out.push(Sent {
                        api_id,
                        amount,
                        key: None,
                        answer,
                    });
                    if dead {
                        break;
                    }
                }
                out
            }));
        }
        // Kill once every slow sale is recorded as pending (the processor
        // holds them for 3 s) and some fast ones are answered.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let list = t.get("/v2/transactions?page_size=100").expect(200);
            let pending = list.body["transactions"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|x| x["transaction_amount"] == "8.03" && x["status_id"].is_null())
                .count();
            if pending == slow && fast_done.load(Ordering::SeqCst) >= fast_threads {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the slow sales never showed as pending together: {}",
                list.text
            );
        }
        app.kill();
        handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });

    // The refund as a crash between its two steps leaves it: pending on
    // a node that is gone, its amount reserved on the original.
    db(app).exec(
        "UPDATE transactions SET state = 'pending', pending_node = 'node-gone', status_id = NULL, \
         reason_code_id = NULL, transaction_batch_id = NULL, batch = NULL, batch_seq = NULL WHERE id = ?",
        &[&refunded],
    );

    app.spawn();
    let t = Tenant {
        base: app.base.clone(),
        creds: t.creds.clone(),
    };

    let mut answered = 0;
    let mut interrupted = 0;
    for s in &sent {
        let what = format!("sale {} of {}", s.api_id, s.amount);
        match &s.answer {
            Some(r) => {
                assert_eq!(r.status, 201, "{what}: {}", r.text);
                answered += 1;
                let got = &r.body["transaction"];
                let now = t.get(&format!("/v2/transactions/{}", tx_id(r))).expect(200);
                let now = &now.body["transaction"];
                assert_eq!(now["status_id"], got["status_id"], "{what}");
                assert_eq!(now["reason_code_id"], got["reason_code_id"], "{what}");
                assert_eq!(now["transaction_amount"], s.amount.as_str(), "{what}");
            }
            None if s.key.is_some() => {}
            None => {
                let r = t
                    .get(&format!("/v2/transactions?transaction_api_id={}", s.api_id))
                    .expect(200);
                let found = r.body["transactions"].as_array().unwrap();
                if s.amount == "8.03" {
                    assert_eq!(found.len(), 1, "{what} was recorded before the kill");
                }
                for x in found {
                    assert!(!x["status_id"].is_null(), "{what} is left pending: {x}");
                    assert_eq!(x["transaction_amount"], s.amount.as_str(), "{what}");
                    if x["reason_code_id"] == 1531 {
                        assert_eq!(x["status_id"], 301, "{what}: {x}");
                        assert_eq!(x["verbiage"], "Interrupted", "{what}");
                        interrupted += 1;
                    }
                }
            }
        }
    }
    assert!(
        answered >= fast_threads,
        "some sales were answered before the kill"
    );
    assert!(
        interrupted >= 1,
        "the in-flight sales were reconciled as interrupted"
    );
    // The slow ones were in flight: declined as interrupted, or (had the
    // processor answered first) declined by it.
    let list = t.get("/v2/transactions?page_size=100").expect(200);
    let all = list.body["transactions"].as_array().unwrap();
    assert!(
        list.body["meta"]["pagination"]["totalCount"].as_u64().unwrap() <= 100,
        "one page shows them all"
    );
    for x in all {
        assert!(!x["status_id"].is_null(), "left pending after the restart: {x}");
        if x["transaction_amount"] == "8.03" {
            assert_eq!(x["status_id"], 301, "{x}");
            assert!(
                x["reason_code_id"] == 1531 || x["reason_code_id"] == 1500,
                "an interrupted slow sale: {x}"
            );
        }
    }

    // The pending refund was reversed and its reservation given back.
    let r = t.get(&format!("/v2/transactions/{refunded}")).expect(200);
    assert_eq!(r.body["transaction"]["status_id"], 301, "{}", r.text);
    assert_eq!(r.body["transaction"]["reason_code_id"], 1531, "{}", r.text);
    assert_approved(t.post("/v2/transactions", refund(&original, "20.00")), 111);

    // The keyed slow sale's key is free again: the retry runs (the first
    // attempt was reversed) instead of answering 409 for ever.
    let keyed_first: Vec<&Value> = all.iter().filter(|x| x["description"] == "slow keyed").collect();
    assert_eq!(keyed_first.len(), 1, "{}", list.text);
    let retry = keyed(
        &t,
        "POST",
        "/v2/transactions",
        "slow-key",
        &sale("8.03", json!({ "description": "slow keyed" })),
    );
    if keyed_first[0]["reason_code_id"] == 1531 {
        let retry = retry.expect(201);
        assert!(!replayed(&retry));
        assert_ne!(retry.body["transaction"]["id"], keyed_first[0]["id"]);
    } else {
        assert!(retry.status == 201, "{}", retry.text);
    }
}

/// A batch left Processing (5) by a crash goes to Re-process (4) at the
/// next start and settles again.
fn interrupted_settlement_is_reprocessed(app: &mut TestApp) {
    let t = app.bootstrap();
    let id = assert_approved(t.post("/v2/transactions", sale("15.00", json!({}))), 101);
    let batch = batch_of(&t, &id);
    let path = format!("/v2/transactionbatches/{batch}");
    // While it is Processing, nobody settles it a second time.
    let now = chrono::Utc::now().timestamp();
    db(app).exec(
        &format!("UPDATE transaction_batches SET processing_status_id = 5, is_open = 0, modified_ts = {now} WHERE id = ?"),
        &[&batch],
    );
    let r = t.post(&format!("{path}/settle"), json!({})).expect(422);
    assert!(!r.errors("id").is_empty(), "{}", r.text);

    // The process dies; the batch stays Processing since long ago.
    app.kill();
    let long_ago = (now - 3600).to_string();
    db(app).exec(
        &format!("UPDATE transaction_batches SET modified_ts = {long_ago} WHERE id = ?"),
        &[&batch],
    );
    app.spawn();
    let t = Tenant {
        base: app.base.clone(),
        creds: t.creds.clone(),
    };
    let b = t.get(&path).expect(200).body["transactionbatch"].clone();
    assert_eq!(b["processing_status_id"], 4, "{b}");
    assert!(b["status_message"].is_string(), "{b}");
    let r = t.post(&format!("{path}/settle"), json!({})).expect(200);
    let b = &r.body["transactionbatch"];
    assert_eq!(b["processing_status_id"], 2, "{}", r.text);
    assert_eq!(b["is_open"], 0);
    assert!(b["settlement_file_name"].is_string(), "{}", r.text);
    let tx = t.get(&format!("/v2/transactions/{id}")).expect(200);
    assert!(tx.body["transaction"]["settle_date"].is_string(), "{}", tx.text);
    t.post(&format!("{path}/settle"), json!({})).expect(422);
}

/// A settle and an action that changes what a batch settles (a void
/// here) never overlap. While a void's processor call is under way (its
/// mark is on the transaction) the settle refuses and changes nothing; on
/// PostgreSQL a void that starts while a settle is closing the batch
/// waits for the settle's job and then refuses. Either way the batch
/// settles exactly what its record says.
fn a_settle_and_a_void_never_overlap(app: &mut TestApp) {
    let t = app.bootstrap();
    let kept = assert_approved(t.post("/v2/transactions", sale("12.00", json!({}))), 101);
    let voided = assert_approved(t.post("/v2/transactions", sale("30.00", json!({}))), 101);
    let batch = batch_of(&t, &voided);
    assert_eq!(batch_of(&t, &kept), batch);
    let path = format!("/v2/transactionbatches/{batch}");

    // The serving node's id, as a sale whose processor answers after a
    // second shows it while pending (it is then declined, reason 1500).
    let slow = {
        let t = t.clone();
        std::thread::spawn(move || t.post("/v2/transactions", sale("8.01", json!({}))))
    };
    let node = wait_until("the slow sale to be pending", Duration::from_secs(10), || {
        let mut d = db(app);
        let pending = "FROM transactions WHERE state = 'pending' AND pending_node IS NOT NULL";
        (d.count(&format!("SELECT COUNT(*) {pending}"), &[]) > 0)
            .then(|| d.text(&format!("SELECT MIN(pending_node) {pending}"), &[]))
    });

    // A void of the $30.00 sale is at the processor: its first job left
    // this mark (the sandbox answers a void at once, so the test sets it).
    db(app).exec(
        "UPDATE transactions SET pending_action = 'void', pending_node = ? WHERE id = ?",
        &[&node, &voided],
    );
    let r = t.post(&format!("{path}/settle"), json!({})).expect(422);
    assert!(
        r.errors("id").iter().any(|e| e.contains("in progress")),
        "{}",
        r.text
    );
    let b = t.get(&path).expect(200).body["transactionbatch"].clone();
    assert_eq!(b["is_open"], 1, "the refused settle closed nothing: {b}");
    assert_eq!(b["processing_status_id"], 1, "{b}");
    let attempts = db(app).count(
        "SELECT settle_attempts FROM transaction_batches WHERE id = ?",
        &[&batch],
    );
    assert_eq!(attempts, 0, "the refused settle was rolled back");
    assert_holds(&b, 2, "42.00");
    // The batch still takes sales.
    let third = assert_approved(t.post("/v2/transactions", sale("5.55", json!({}))), 101);
    assert_eq!(batch_of(&t, &third), batch);

    // The void's call ends; its second job clears the mark and records it.
    db(app).exec(
        "UPDATE transactions SET pending_action = NULL, pending_node = NULL WHERE id = ?",
        &[&voided],
    );
    let r = t.put(
        &format!("/v2/transactions/{voided}"),
        json!({ "transaction": { "action": "void" } }),
    );
    assert_eq!(r.expect(200).body["transaction"]["status_id"], 201);

    if app.engine == Engine::Postgres {
        // A void's first job has held the batch and marked the $12.00
        // sale, and has not committed yet: a settle waits for it, then
        // sees the mark and refuses.
        let mut void_job = db(app);
        void_job.exec("BEGIN", &[]);
        void_job.exec(
            "SELECT id FROM transaction_batches WHERE id = ? FOR NO KEY UPDATE",
            &[&batch],
        );
        void_job.exec(
            "UPDATE transactions SET pending_action = 'void', pending_node = ? WHERE id = ?",
            &[&node, &kept],
        );
        let settle = {
            let (t, path) = (t.clone(), path.clone());
            std::thread::spawn(move || t.post(&format!("{path}/settle"), json!({})))
        };
        wait_for_lock_wait(app, &settle, "the settle did not wait for the void's job");
        void_job.exec("COMMIT", &[]);
        let r = settle.join().unwrap().expect(422);
        assert!(
            r.errors("id").iter().any(|e| e.contains("in progress")),
            "{}",
            r.text
        );
        db(app).exec(
            "UPDATE transactions SET pending_action = NULL, pending_node = NULL WHERE id = ?",
            &[&kept],
        );

        // The other order: a settle has closed the batch and not committed
        // yet; a void waits for it, then sees the batch settling.
        let mut settle = db(app);
        settle.exec("BEGIN", &[]);
        settle.exec(
            "UPDATE transaction_batches SET is_open = 0, processing_status_id = 5 WHERE id = ?",
            &[&batch],
        );
        let void = {
            let t = t.clone();
            let kept = kept.clone();
            std::thread::spawn(move || {
                t.put(
                    &format!("/v2/transactions/{kept}"),
                    json!({ "transaction": { "action": "void" } }),
                )
            })
        };
        wait_for_lock_wait(app, &void, "the void ran while a settle was closing its batch");
        settle.exec("COMMIT", &[]);
        let r = void.join().unwrap().expect(422);
        assert!(
            r.errors("action").iter().any(|e| e.contains("being settled")),
            "{}",
            r.text
        );
        // That settle ended in Error (3), from which a batch is settled
        // again.
        db(app).exec(
            "UPDATE transaction_batches SET processing_status_id = 3 WHERE id = ?",
            &[&batch],
        );
    }

    let r = t.post(&format!("{path}/settle"), json!({})).expect(200);
    let b = &r.body["transactionbatch"];
    assert_eq!(b["processing_status_id"], 2, "{}", r.text);
    assert_holds(b, 2, "17.55");
    let tx = stored(&t, &kept);
    assert_eq!(
        (tx["status_id"].clone(), tx["transaction_amount"].clone()),
        (json!(101), json!("12.00"))
    );
    let declined = slow.join().unwrap().expect(201);
    assert_eq!(
        declined.body["transaction"]["status_id"], 301,
        "{}",
        declined.text
    );
}

/// PostgreSQL: a sale finds its product transaction's open batch early in
/// its completing job and counts itself there last; a settle on another
/// connection that closes the batch in between sends the sale to the next
/// batch. Its answer, its record and its postback all name that batch.
/// (On SQLite jobs never overlap, so the settle cannot come in between.)
fn a_sale_moved_to_the_next_batch_says_so_everywhere(app: &mut TestApp) {
    if app.engine != Engine::Postgres {
        return;
    }
    let t = app.bootstrap();
    let config = json!({ "resource": "transaction", "url": "http://127.0.0.1:9/hook",
        "on_create": true, "location_id": t.location_id(), "product_transaction_id": t.cred("cc_product_transaction_id") });
    t.post("/v2/postbackconfigs", json!({ "postbackconfig": config }))
        .expect(201);
    let first = assert_approved(t.post("/v2/transactions", sale("10.00", json!({}))), 101);
    let closing = batch_of(&t, &first);

    // A settle closes the batch, folds its tallies (as `begin_settle`
    // does) and has not committed yet.
    let mut settle = db(app);
    settle.exec("BEGIN", &[]);
    settle.exec(
        "UPDATE transaction_batches SET is_open = 0, processing_status_id = 5 WHERE id = ?",
        &[&closing],
    );
    settle.exec(
        "UPDATE transaction_batches SET transaction_count = transaction_count + \
         (SELECT SUM(k.transaction_count) FROM batch_tallies k WHERE k.batch_id = transaction_batches.id), \
         total_amount = total_amount + \
         (SELECT SUM(k.total_amount) FROM batch_tallies k WHERE k.batch_id = transaction_batches.id) WHERE id = ?",
        &[&closing],
    );
    settle.exec("DELETE FROM batch_tallies WHERE batch_id = ?", &[&closing]);
    let moved = {
        let t = t.clone();
        std::thread::spawn(move || t.post("/v2/transactions", sale("7.25", json!({}))))
    };
    wait_for_lock_wait(app, &moved, "the sale never reached the batch the settle holds");
    settle.exec("COMMIT", &[]);
    let answer = moved.join().unwrap().expect(201);
    let sold = &answer.body["transaction"];
    assert_eq!(sold["status_id"], 101, "{}", answer.text);
    let next = str_of(&sold["transaction_batch_id"]);
    assert_ne!(next, closing, "{}", answer.text);
    assert_eq!(sold["batch"], "2", "{}", answer.text);
    let id = str_of(&sold["id"]);
    assert_eq!(batch_of(&t, &id), next);

    // One delivery of the sale's creation, naming the batch it is in.
    let mut d = db(app);
    assert_eq!(
        d.count(
            "SELECT COUNT(*) FROM postback_deliveries WHERE record_id = ?",
            &[&id]
        ),
        1
    );
    let payload = d.text(
        "SELECT payload FROM postback_deliveries WHERE record_id = ?",
        &[&id],
    );
    let payload: Value = serde_json::from_str(&payload).unwrap();
    assert_eq!(str_of(&payload["transaction_batch_id"]), next, "{payload}");
    assert_eq!(payload["batch"], "2", "{payload}");

    // Each batch counts what it holds.
    for (batch, count, total) in [(&closing, 1, "10.00"), (&next, 1, "7.25")] {
        let b =
            t.get(&format!("/v2/transactionbatches/{batch}")).expect(200).body["transactionbatch"].clone();
        assert_holds(&b, count, total);
    }
}

/// A tenant with one approved sale of $10.00, its batch, and a session
/// that holds `lock` (a statement of the batch's id) in a transaction
/// the test ends.
fn one_sale_and_a_lock_on_its_batch(app: &TestApp, lock: &str) -> (Tenant, String, Db) {
    let t = app.bootstrap();
    let first = assert_approved(t.post("/v2/transactions", sale("10.00", json!({}))), 101);
    let batch = batch_of(&t, &first);
    let mut holder = db(app);
    holder.exec("BEGIN", &[]);
    holder.exec(lock, &[&batch]);
    (t, batch, holder)
}

/// PostgreSQL: a sale counts itself in its batch and stores its outcome
/// in one statement (ADR 0025). If the row was reversed meanwhile (the
/// reconciler of another node took the sale's node for dead), the sale
/// answers 503 and its count goes back with the rest of its job: the
/// batch holds only what it held, and the row stays as reversed.
fn a_sale_reversed_while_completing_is_not_counted(app: &mut TestApp) {
    if app.engine != Engine::Postgres {
        return;
    }
    // The test holds the batch's stripes, so the next sale's completing
    // statement waits there; meanwhile its row is reversed.
    let (t, batch, mut holder) = one_sale_and_a_lock_on_its_batch(
        app,
        "SELECT batch_id FROM batch_tallies WHERE batch_id = ? FOR UPDATE",
    );
    let waiting = {
        let t = t.clone();
        std::thread::spawn(move || t.post("/v2/transactions", sale("7.25", json!({}))))
    };
    wait_for_lock_wait(app, &waiting, "the sale never reached the stripes the test holds");
    let mut d = db(app);
    let pending = d.text("SELECT id FROM transactions WHERE state = 'pending'", &[]);
    let reversed = d.exec(
        "UPDATE transactions SET state = 'done', status_id = 301, reason_code_id = 1531, \
         pending_node = NULL WHERE id = ?",
        &[&pending],
    );
    assert_eq!(reversed, 1);
    holder.exec("ROLLBACK", &[]);

    let answer = waiting.join().unwrap().expect(503);
    assert!(answer.text.contains("interrupted"), "{}", answer.text);
    let row = stored(&t, &pending);
    assert_eq!(
        (row["status_id"].clone(), row["reason_code_id"].clone()),
        (json!(301), json!(1531)),
        "{row}"
    );
    let b = t.get(&format!("/v2/transactionbatches/{batch}")).expect(200).body["transactionbatch"].clone();
    assert_holds(&b, 1, "10.00");
}

/// PostgreSQL: a sale counts itself in one stripe of its open batch's
/// tallies, not in the batch's row (ADR 0025), so sales complete while
/// another job holds that row (before, every sale of a product
/// transaction waited for the one before it to commit). A settle waits
/// for a count not yet committed and folds it in.
fn sales_of_one_batch_do_not_wait_for_its_row(app: &mut TestApp) {
    if app.engine != Engine::Postgres {
        return;
    }
    // Another job holds the batch's row until the test says.
    let (t, batch, mut holder) = one_sale_and_a_lock_on_its_batch(
        app,
        "SELECT id FROM transaction_batches WHERE id = ? FOR NO KEY UPDATE",
    );
    let sales = {
        let t = t.clone();
        std::thread::spawn(move || {
            (0..6)
                .map(|i| t.post("/v2/transactions", sale(&format!("1.0{i}"), json!({}))))
                .collect::<Vec<_>>()
        })
    };
    wait_until(
        "six sales beside a held batch row",
        Duration::from_secs(30),
        || {
            let waiting = db(app).count(
            "SELECT COUNT(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()",
            &[],
        );
            assert_eq!(waiting, 0, "a sale waited for the batch's row");
            sales.is_finished().then_some(())
        },
    );
    holder.exec("COMMIT", &[]);
    for r in sales.join().unwrap() {
        let r = r.expect(201);
        assert_eq!(r.body["transaction"]["status_id"], 101, "{}", r.text);
        assert_eq!(
            str_of(&r.body["transaction"]["transaction_batch_id"]),
            batch,
            "{}",
            r.text
        );
    }
    let path = format!("/v2/transactionbatches/{batch}");
    let b = t.get(&path).expect(200).body["transactionbatch"].clone();
    assert_holds(&b, 7, "16.15");
    let filtered = t.get("/v2/transactionbatches?transaction_count=7").expect(200);
    assert_eq!(
        filtered.body["transactionbatches"].as_array().map(Vec::len),
        Some(1),
        "{}",
        filtered.text
    );

    // A count in a stripe not committed yet (a sale between its count and
    // its commit): the settle waits for it and settles it with the rest.
    let mut counting = db(app);
    counting.exec("BEGIN", &[]);
    counting.exec(
        "UPDATE batch_tallies SET transaction_count = transaction_count + 1, total_amount = total_amount + 500 \
         WHERE batch_id = ? AND stripe = 3",
        &[&batch],
    );
    let settle = {
        let (t, path) = (t.clone(), path.clone());
        std::thread::spawn(move || t.post(&format!("{path}/settle"), json!({})))
    };
    wait_for_lock_wait(app, &settle, "the settle did not wait for a count in progress");
    counting.exec("COMMIT", &[]);
    let settled = settle.join().unwrap().expect(200);
    let b = &settled.body["transactionbatch"];
    assert_eq!(b["processing_status_id"], 2, "{}", settled.text);
    assert_holds(b, 8, "21.15");
    let mut d = db(app);
    assert_eq!(
        d.count("SELECT COUNT(*) FROM batch_tallies WHERE batch_id = ?", &[&batch]),
        0
    );
    assert_eq!(
        d.count(
            "SELECT transaction_count FROM transaction_batches WHERE id = ?",
            &[&batch]
        ),
        8,
        "the row holds the folded count"
    );
    // The next sale opens batch 2.
    let next = assert_approved(t.post("/v2/transactions", sale("3.00", json!({}))), 101);
    let tx = stored(&t, &next);
    assert_ne!(str_of(&tx["transaction_batch_id"]), batch);
    assert_eq!(tx["batch"], "2", "{tx}");
}

/// A batch opened by something other than this build's sale path (an
/// older node during an upgrade, an operator) gets its tally stripes from
/// the database (migration 27's trigger), so sales count in it.
fn a_batch_opened_by_another_writer_takes_sales(app: &mut TestApp) {
    let t = app.bootstrap();
    let pt = t.cred("cc_product_transaction_id");
    let batch = "0123456789abcdef0123456789abcdef";
    db(app).exec(
        "INSERT INTO transaction_batches (id, batch_num, product_transaction_id, location_id, created_ts, modified_ts, \
         processing_status_id, is_open, transaction_count, total_amount, settle_attempts, entries) \
         VALUES (?, 1, ?, ?, 1, 1, 1, 1, 0, 0, 0, 0)",
        &[batch, &pt, &t.location_id()],
    );
    let id = assert_approved(t.post("/v2/transactions", sale("4.50", json!({}))), 101);
    assert_eq!(batch_of(&t, &id), batch);
    let b = t.get(&format!("/v2/transactionbatches/{batch}")).expect(200).body["transactionbatch"].clone();
    assert_holds(&b, 1, "4.50");
}

/// A node keeps a hint of each product transaction's open batch. A sale
/// whose hint names a batch that is not there (its job never committed;
/// here it is deleted behind the node's back) is counted and stored in
/// an open batch, never under the missing one's id: before, PostgreSQL's
/// one-statement completion stored that id and failed on its foreign
/// key after the processor had charged.
fn a_sale_whose_batch_is_gone_finds_an_open_one(app: &mut TestApp) {
    let t = app.bootstrap();
    let first = assert_approved(t.post("/v2/transactions", sale("10.00", json!({}))), 101);
    let gone = batch_of(&t, &first);
    let mut d = db(app);
    d.exec(
        "UPDATE transactions SET transaction_batch_id = NULL WHERE id = ?",
        &[&first],
    );
    d.exec("DELETE FROM batch_tallies WHERE batch_id = ?", &[&gone]);
    d.exec("DELETE FROM transaction_batches WHERE id = ?", &[&gone]);

    let answer = t.post("/v2/transactions", sale("4.50", json!({}))).expect(201);
    let id = str_of(&answer.body["transaction"]["id"]);
    assert_eq!(answer.body["transaction"]["status_id"], 101, "{}", answer.text);
    let batch = batch_of(&t, &id);
    assert_ne!(batch, gone);
    assert_eq!(str_of(&answer.body["transaction"]["transaction_batch_id"]), batch);
    let b = t.get(&format!("/v2/transactionbatches/{batch}")).expect(200).body["transactionbatch"].clone();
    assert_holds(&b, 1, "4.50");
}

/// A node keeps the configuration a sale reads (its location's default
/// product transaction, the product transaction, the postback configs
/// that want its events) under `auth_epoch` (ADR 0024). A change made
/// straight in the database, as another node or an older binary would
/// make it, applies from the very next sale.
fn what_a_sale_reads_follows_changes_made_behind_its_back(app: &mut TestApp) {
    let t = app.bootstrap();
    let pt = t.cred("cc_product_transaction_id");
    let named = |amount: &str| sale(amount, json!({ "product_transaction_id": pt }));
    // Twice each, so the second is served from what the node keeps.
    for _ in 0..2 {
        assert_approved(t.post("/v2/transactions", sale("3.00", json!({}))), 101);
        assert_approved(t.post("/v2/transactions", named("3.00")), 101);
    }

    // The product transaction switched off.
    db(app).exec("UPDATE product_transactions SET active = 0 WHERE id = ?", &[&pt]);
    let r = t.post("/v2/transactions", named("3.01")).expect(422);
    assert!(
        r.errors("product_transaction_id")
            .iter()
            .any(|e| e.contains("not active")),
        "{}",
        r.text
    );
    db(app).exec("UPDATE product_transactions SET active = 1 WHERE id = ?", &[&pt]);
    assert_approved(t.post("/v2/transactions", named("3.02")), 101);

    // The location's default taken away: a sale naming none has none.
    db(app).exec(
        "UPDATE locations SET default_cc = NULL WHERE id = ?",
        &[&t.location_id()],
    );
    let r = t.post("/v2/transactions", sale("3.03", json!({}))).expect(422);
    assert!(!r.errors("product_transaction_id").is_empty(), "{}", r.text);
    db(app).exec(
        "UPDATE locations SET default_cc = ? WHERE id = ?",
        &[&pt, &t.location_id()],
    );

    // A postback config, inactive while sales are made, then switched on.
    let config = json!({ "resource": "transaction", "url": "http://127.0.0.1:9/hook", "on_create": true,
        "is_active": false, "location_id": t.location_id(), "product_transaction_id": pt });
    let config = str_of(
        &t.post("/v2/postbackconfigs", json!({ "postbackconfig": config }))
            .expect(201)
            .body["postbackconfig"]["id"],
    );
    let unheard = [named("3.04"), named("3.05")].map(|s| tx_id(&t.post("/v2/transactions", s).expect(201)));
    db(app).exec(
        "UPDATE postback_configs SET is_active = 1 WHERE id = ?",
        &[&config],
    );
    let heard = tx_id(&t.post("/v2/transactions", named("3.06")).expect(201));
    let deliveries = |id: &str| {
        db(app).count(
            "SELECT COUNT(*) FROM postback_deliveries WHERE record_id = ?",
            &[id],
        )
    };
    assert_eq!(unheard.map(|id| deliveries(&id)), [0, 0]);
    assert_eq!(
        deliveries(&heard),
        1,
        "the config switched on hears the next sale"
    );
    // And deleted: the next sale is heard by nobody.
    db(app).exec("DELETE FROM postback_configs WHERE id = ?", &[&config]);
    let after = tx_id(&t.post("/v2/transactions", named("3.07")).expect(201));
    assert_eq!(deliveries(&after), 0, "the deleted config hears nothing");
}

/// Sends a request on a fresh connection and closes the connection right
/// after the last byte, without reading any answer.
fn send_and_hang_up(base: &str, t: &Tenant, path: &str, key: Option<&str>, body: &Value) {
    use std::io::Write;
    let addr = base.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(addr).expect("connect");
    let body = body.to_string();
    let mut head = format!(
        "POST {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n",
        body.len()
    );
    for (k, v) in auth(t) {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if let Some(key) = key {
        head.push_str(&format!("idempotency-key: {key}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).expect("write head");
    stream.write_all(body.as_bytes()).expect("write body");
    stream.flush().expect("flush");
    stream.shutdown(std::net::Shutdown::Both).expect("hang up");
}

/// The transaction with this api id, once it has the processor's answer.
fn answered(t: &Tenant, api_id: &str) -> Option<Value> {
    let r = t
        .get(&format!("/v2/transactions?transaction_api_id={api_id}"))
        .expect(200);
    let tx = r.body["transactions"].as_array()?.first()?.clone();
    (!tx["status_id"].is_null()).then_some(tx)
}

/// A client that goes away right after sending does not stop its payment:
/// the processor's answer is recorded when it arrives (at once for a
/// plain sale, after its 1 s delay for an $8.01 sale), not reversed as an
/// orphan, and a retry with the same key gets that answer.
fn a_sale_whose_client_disconnects_is_recorded(app: &TestApp) {
    let t = app.bootstrap();
    // What the sandbox answers a connected client, to compare with.
    let control = |amount: &str| {
        t.post("/v2/transactions", sale(amount, json!({})))
            .expect(201)
            .body["transaction"]
            .clone()
    };
    let (plain, slow) = (control("10.00"), control("8.01"));
    assert_eq!(plain["status_id"], 101);
    let mut expected = Vec::new();
    for i in 0..20 {
        // $8.01: the sandbox answers after 1 s, long after the hang-up.
        let amount = if i % 4 == 0 { "8.01" } else { "10.00" };
        let api_id = format!("gone-{i}");
        let key = format!("gone-key-{i}");
        let body = sale(amount, json!({ "transaction_api_id": api_id }));
        send_and_hang_up(&t.base, &t, "/v2/transactions", Some(&key), &body);
        expected.push((api_id, key, body, amount));
    }
    for (api_id, key, body, amount) in &expected {
        // Generous for a loaded machine, and still far below the two
        // minutes after which the reconciler would reverse an orphan.
        let tx = wait_until(
            &format!("{api_id} ({amount}) to have its answer"),
            Duration::from_secs(30),
            || answered(&t, api_id),
        );
        // The processor's own answer, not the reconciler's reversal (1531).
        let want = if *amount == "8.01" { &slow } else { &plain };
        assert_eq!(tx["status_id"], want["status_id"], "{api_id}: {tx}");
        assert_eq!(tx["reason_code_id"], want["reason_code_id"], "{api_id}: {tx}");
        assert_eq!(tx["transaction_amount"], *amount);
        // The retry replays the recorded answer instead of a 409.
        let again = keyed(&t, "POST", "/v2/transactions", key, body).expect(201);
        assert!(replayed(&again), "{api_id}: {:?}", again.headers);
        assert_eq!(again.body["transaction"]["id"], tx["id"]);
    }
    assert_eq!(count(&t), expected.len() as u64 + 2, "one charge per request");
}

/// SIGTERM while a sale whose client is gone waits for the processor (the
/// sandbox answers $8.02 after 2 s): the server records the answer before
/// it exits, so the next start has nothing to reverse.
fn a_stopping_server_finishes_the_payments_it_began(app: &mut TestApp) {
    let t = app.bootstrap();
    let control = t
        .post("/v2/transactions", sale("8.02", json!({})))
        .expect(201)
        .body["transaction"]
        .clone();
    let body = sale("8.02", json!({ "transaction_api_id": "late-1" }));
    send_and_hang_up(&t.base, &t, "/v2/transactions", None, &body);
    // The sale is under way once its pending row exists.
    wait_until("the sale to be pending", Duration::from_secs(5), || {
        let r = t.get("/v2/transactions?transaction_api_id=late-1").expect(200);
        r.body["transactions"].as_array().and_then(|a| a.first().cloned())
    });
    let status = app.stop();
    assert!(status.success(), "{status:?}");
    app.spawn();
    let t = Tenant {
        base: app.base.clone(),
        creds: t.creds.clone(),
    };
    let tx = answered(&t, "late-1").expect("recorded");
    assert_eq!(tx["status_id"], control["status_id"], "{tx}");
    assert_eq!(
        tx["reason_code_id"], control["reason_code_id"],
        "not reversed at restart: {tx}"
    );
}

/// Sends `bodies` as PUTs on transaction `id`, all at once.
fn put_all_at_once(t: &Tenant, id: &str, bodies: Vec<Value>) -> Vec<Resp> {
    let barrier = Arc::new(Barrier::new(bodies.len()));
    std::thread::scope(|s| {
        let handles: Vec<_> = bodies
            .into_iter()
            .map(|body| {
                let (t, barrier) = (t.clone(), barrier.clone());
                let path = format!("/v2/transactions/{id}");
                s.spawn(move || {
                    barrier.wait();
                    t.put(&path, body)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// Many captures of one authorization sent at once: one goes to the
/// processor, the others are refused, and the batch counts the one
/// captured amount; ACH voids alike. (The interleaving that once let two
/// captures through on PostgreSQL is forced in the next test.)
fn one_action_at_a_time_on_a_transaction(app: &TestApp) {
    let t = app.bootstrap();
    let mut total_cents = 0;
    for round in 0..6 {
        let a = t
            .post("/v2/transactions", sale("10.00", json!({ "action": "authonly" })))
            .expect(201);
        let a = tx_id(&a);
        let bodies = (0..16)
            .map(|i| {
                let amount = if i % 2 == 0 { "10.00" } else { "4.00" };
                json!({ "transaction": { "action": "authcomplete", "transaction_amount": amount } })
            })
            .collect();
        let answers = put_all_at_once(&t, &a, bodies);
        let captured: Vec<&Resp> = answers.iter().filter(|r| r.status == 200).collect();
        assert_eq!(captured.len(), 1, "round {round}: one capture");
        for r in answers.iter().filter(|r| r.status != 200) {
            assert_eq!(r.status, 422, "round {round}: {}", r.text);
        }
        let amount = captured[0].body["transaction"]["transaction_amount"].clone();
        let stored = stored(&t, &a);
        assert_eq!(stored["transaction_amount"], amount, "round {round}");
        let batch = t
            .get(&format!("/v2/transactionbatches/{}", batch_of(&t, &a)))
            .expect(200);
        total_cents += match amount.as_str() {
            Some("10.00") => 1000,
            Some("4.00") => 400,
            other => panic!("round {round}: captured {other:?}"),
        };
        let total = format!("{}.{:02}", total_cents / 100, total_cents % 100);
        assert_holds(&batch.body["transactionbatch"], round + 1, total);
    }
    let debit = t
        .post("/v2/transactions", ach("debit", &t, "12.00", "WEB"))
        .expect(201);
    let debit = tx_id(&debit);
    let voids = (0..12)
        .map(|_| json!({ "transaction": { "action": "void" } }))
        .collect();
    let answers = put_all_at_once(&t, &debit, voids);
    assert_eq!(answers.iter().filter(|r| r.status == 200).count(), 1, "one void");
    assert!(answers.iter().all(|r| matches!(r.status, 200 | 422)));
}

/// PostgreSQL: an action's checks and its mark see the same row. Here a
/// void commits (the test plays it) after a capture of the same
/// authorization has found the transaction but before it marks it; the
/// capture must see the void and refuse, not capture a voided
/// authorization (its checks once read the row unlocked, and its mark
/// only asked that no action was in flight).
fn an_action_checks_the_row_as_it_is_when_it_marks_it(app: &mut TestApp) {
    if app.engine != Engine::Postgres {
        return;
    }
    let t = app.bootstrap();
    let a = t
        .post("/v2/transactions", sale("10.00", json!({ "action": "authonly" })))
        .expect(201);
    let a = tx_id(&a);
    let mut voiding = db(app);
    voiding.exec("BEGIN", &[]);
    voiding.exec("SELECT id FROM transactions WHERE id = ? FOR UPDATE", &[&a]);
    let capture = {
        let (t, a) = (t.clone(), a.clone());
        std::thread::spawn(move || {
            t.put(
                &format!("/v2/transactions/{a}"),
                json!({ "transaction": { "action": "authcomplete", "transaction_amount": "4.00" } }),
            )
        })
    };
    wait_for_lock_wait(app, &capture, "the capture never reached the row the test holds");
    voiding.exec(
        "UPDATE transactions SET status_id = 201, transaction_amount = 0 WHERE id = ?",
        &[&a],
    );
    voiding.exec("COMMIT", &[]);
    let r = capture.join().unwrap().expect(422);
    assert!(!r.errors("action").is_empty(), "{}", r.text);
    let row = stored(&t, &a);
    assert_eq!(
        (row["status_id"].clone(), row["transaction_amount"].clone()),
        (json!(201), json!("0.00")),
        "{row}"
    );
}

/// Two actions giving two transactions the same `transaction_api_id`:
/// the loser is refused before its processor call, and its transaction
/// is left as it was, free for the next action.
fn an_api_id_claimed_twice_is_refused_before_the_processor(app: &TestApp) {
    let t = app.bootstrap();
    for round in 0..4 {
        let a = tx_id(&t.post("/v2/transactions", sale("10.00", json!({}))).expect(201));
        let b = tx_id(&t.post("/v2/transactions", sale("11.00", json!({}))).expect(201));
        let api_id = format!("claimed-{round}");
        let barrier = Arc::new(Barrier::new(2));
        let answers: Vec<(String, Resp)> = std::thread::scope(|s| {
            let handles: Vec<_> = [a.clone(), b.clone()]
                .into_iter()
                .map(|id| {
                    let (t, barrier, api_id) = (t.clone(), barrier.clone(), api_id.clone());
                    s.spawn(move || {
                        barrier.wait();
                        let body =
                            json!({ "transaction": { "action": "void", "transaction_api_id": api_id } });
                        let r = t.put(&format!("/v2/transactions/{id}"), body);
                        (id, r)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let won: Vec<_> = answers.iter().filter(|(_, r)| r.status == 200).collect();
        assert_eq!(won.len(), 1, "round {round}: one void takes the api id");
        let (lost, r) = answers.iter().find(|(_, r)| r.status != 200).unwrap();
        let r = r.clone().expect(422);
        assert!(!r.errors("transaction_api_id").is_empty(), "{}", r.text);
        let loser = stored(&t, lost);
        assert_eq!(loser["status_id"], 101, "round {round}: the loser was not voided");
        assert_eq!(loser["transaction_api_id"], Value::Null);
        // Nothing of the refused action is left on it: it voids at once.
        let r = t
            .put(
                &format!("/v2/transactions/{lost}"),
                json!({ "transaction": { "action": "void" } }),
            )
            .expect(200);
        assert_eq!(r.body["transaction"]["status_id"], 201);
    }
}
