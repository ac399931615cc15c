//! What a fuzzer and a hostile client found (the hardening issue), one
//! regression test per finding.

use crate::engine_tests;
use crate::support::TestApp;

engine_tests!(duplicate_keys_are_refused, one_grammar_for_amounts);

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

/// Amounts: digits, an optional point and at most two decimals, in
/// strings and JSON numbers alike; everything else a 422 on the field.
fn one_grammar_for_amounts(app: &TestApp) {
    let t = app.bootstrap();
    let sale = |amount: &str| {
        format!(
            r#"{{"transaction":{{"action":"sale","payment_method":"cc","account_number":"4111111111111111",
            "exp_date":"1239","transaction_amount":{amount}}}}}"#
        )
    };
    for bad in [
        r#"" 10.00""#,
        r#""10.00 ""#,
        r#""10.""#,
        r#"".5""#,
        r#""+10.00""#,
        r#""1e3""#,
        r#""10.500""#,
        r#""1,000.00""#,
        "1e2",
        "1.5e1",
        "1E2",
        "10.500",
        "-1",
        r#""-1.00""#,
    ] {
        let r = t.send("POST", "/v2/transactions", Some(&sale(bad)));
        assert_eq!(r.status, 422, "{bad}: {}", r.text);
        assert!(
            r.body["errors"]["transaction_amount"].is_array(),
            "{bad}: the error names the field: {}",
            r.text
        );
    }
    assert_eq!(
        total(&t, "/v2/transactions"),
        0,
        "no refused amount charged anything"
    );
    for (good, answered) in [
        ("10", "10.00"),
        ("10.5", "10.50"),
        (r#""10.50""#, "10.50"),
        (r#""0007.25""#, "7.25"),
    ] {
        let r = t.send("POST", "/v2/transactions", Some(&sale(good)));
        assert_eq!(r.status, 201, "{good}: {}", r.text);
        assert_eq!(r.body["transaction"]["transaction_amount"], answered, "{good}");
    }
}
