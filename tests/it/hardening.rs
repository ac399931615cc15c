//! What a fuzzer and a hostile client found (the hardening issue), one
//! regression test per finding.

use crate::engine_tests;
use crate::support::TestApp;

engine_tests!(duplicate_keys_are_refused);

fn total(t: &crate::support::Tenant, list: &str) -> i64 {
    t.get(list).expect(200).body["meta"]["pagination"]["totalCount"]
        .as_i64()
        .unwrap()
}

/// A key given twice is a 400 naming it, at any depth; nothing is written
/// (the last value must never win: 1.00 then 999.00 charged 999.00).
fn duplicate_keys_are_refused(app: &TestApp) {
    let t = app.bootstrap();
    let sale = r#"{"transaction":{"action":"sale","payment_method":"cc","account_number":"4111111111111111",
        "exp_date":"1239","transaction_amount":"1.00","transaction_amount":"999.00"}}"#;
    let r = t.send("POST", "/v2/transactions", Some(sale));
    assert_eq!(r.status, 400, "{}", r.text);
    assert!(r.text.contains("transaction.transaction_amount"), "{}", r.text);
    assert!(r.body["request_id"].is_string());
    assert_eq!(total(&t, "/v2/transactions"), 0, "nothing charged");
    for body in [
        r#"{"contact":{"last_name":"A","last_name":"B"}}"#,
        r#"{"contact":{"last_name":"A"},"contact":{"last_name":"B"}}"#,
    ] {
        let r = t.send("POST", "/v2/contacts", Some(body));
        assert_eq!(r.status, 400, "{body}: {}", r.text);
        assert!(r.text.contains("more than once"), "{}", r.text);
    }
    assert_eq!(total(&t, "/v2/contacts"), 0);
    // The same key in two different objects is fine.
    let ok = r#"{"contact":{"last_name":"A","custom":{"last_name":"x"}}}"#;
    let r = t.send("POST", "/v2/contacts", Some(ok));
    assert_ne!(r.status, 400, "{}", r.text);
}
