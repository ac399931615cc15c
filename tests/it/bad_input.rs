//! Bad input: no request, however malformed, gets a 5xx or leaves a
//! partial write. Every write endpoint gets a table of broken bodies, each
//! answered 400 (not JSON, or not an object), 422 (naming the field) or 413
//! (too large) with a JSON body carrying the request id, and each followed
//! by a list showing that nothing changed. Lists and single reads get
//! broken query strings and ids.

use crate::engine_tests;
use crate::support::{Client, Resp, Tenant, TestApp};
use serde_json::{json, Value};

engine_tests!(
    post_contacts_rejects_bad_bodies,
    put_contacts_rejects_bad_bodies,
    post_locations_rejects_bad_bodies,
    put_locations_rejects_bad_bodies,
    post_notes_rejects_bad_bodies,
    put_notes_rejects_bad_bodies,
    post_users_rejects_bad_bodies,
    put_users_rejects_bad_bodies,
    post_authroleusers_rejects_bad_bodies,
    hostile_strings_are_stored_verbatim,
    lengths_count_characters,
    bad_list_parameters_are_422,
    hostile_filter_values_match_nothing,
    bad_single_read_parameters_are_422,
    bad_ids_in_paths_are_404,
    error_bodies_carry_the_request_id,
    bad_credentials_are_401,
    body_limit_is_exactly_1_mib,
    numbers_sent_as_names_are_not_echoed,
);

/// The root of the location tree: exists, but is in no tenant's scope.
const ROOT: &str = "00000000000000000000000000000000";
/// One more byte than the largest body accepted (1 MiB).
const OVER_LIMIT: usize = 1024 * 1024 + 1;

/// SQL-looking strings: stored and read back verbatim when otherwise valid.
const SQLISH: &[&str] = &[
    "'; DROP TABLE contacts; --",
    "\" OR 1=1 --",
    "1' OR '1'='1",
    "Robert'); DROP TABLE users;--",
    "x' UNION SELECT id FROM users --",
    "50% off_ \\ back\\slash",
];

/// Scripts and symbols that must survive the round trip byte for byte.
const UNICODE: &[&str] = &[
    "😀 👩\u{200d}👩\u{200d}👧\u{200d}👦 🇳🇴",
    "مرحبا بالعالم",
    "שלום \u{202e}txet desrever",
    "Zoe\u{308} Łukasiewicz 字",
    "<script>alert(1)</script>",
];

/// Cuts long texts for assertion messages.
fn short(s: &str) -> String {
    if s.chars().count() > 240 {
        format!(
            "{}... ({} bytes)",
            s.chars().take(240).collect::<String>(),
            s.len()
        )
    } else {
        s.to_string()
    }
}

fn enc(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// Problems collected over many requests, reported together.
#[derive(Default)]
struct Failures(Vec<String>);

impl Failures {
    fn add(&mut self, what: &str, problem: Option<String>) {
        if let Some(p) = problem {
            self.0.push(format!("{what}: {p}"));
        }
    }
    /// A list answer that must be 200 with no record.
    /// 200 with no match; for typed filters (dates) a 422 naming the
    /// parameter is as good: such a value cannot be a date.
    fn no_match(&mut self, what: &str, r: &Resp) {
        let typed_refusal =
            r.status == 422 && what.contains("date_of_birth=") && json_error_problem(r).is_none();
        let p = if typed_refusal {
            None
        } else if r.status != 200 {
            Some(format!("want 200, got {}: {}", r.status, short(&r.text)))
        } else if r.body["meta"]["pagination"]["totalCount"] != 0 {
            Some(format!("want no match: {}", short(&r.text)))
        } else {
            None
        };
        self.add(what, p);
    }
    #[track_caller]
    fn assert_none(self, title: &str) {
        let shown: Vec<&str> = self.0.iter().take(40).map(String::as_str).collect();
        assert!(
            self.0.is_empty(),
            "{title}: {} failures (first {} shown):\n{}",
            self.0.len(),
            shown.len(),
            shown.join("\n")
        );
    }
}

/// What every error response is: a 4xx with a JSON object body whose
/// `request_id` equals the `x-request-id` header. `None` when it is.
pub fn json_error_problem(r: &Resp) -> Option<String> {
    if !(400..500).contains(&r.status) {
        return Some(format!("want a 4xx, got {}: {}", r.status, short(&r.text)));
    }
    if !r.body.is_object() {
        return Some(format!(
            "the {} body is not a JSON object: {:?}",
            r.status,
            short(&r.text)
        ));
    }
    let Some(id) = r.header("x-request-id").filter(|id| !id.is_empty()) else {
        return Some("no x-request-id header".into());
    };
    if r.body["request_id"].as_str() != Some(id) {
        return Some(format!(
            "request_id in the body differs from the x-request-id header {id}: {}",
            short(&r.text)
        ));
    }
    None
}

#[track_caller]
pub fn assert_json_error(r: &Resp, what: &str) {
    if let Some(p) = json_error_problem(r) {
        panic!("{what}: {p}");
    }
}

/// What a refused request must be answered with.
#[derive(Clone, Debug)]
enum Want {
    /// 400: not JSON, or not a JSON object.
    Malformed,
    /// 422 whose errors name this field.
    Invalid(String),
    /// Well-formed JSON a parser may refuse (a lone surrogate, 1e400):
    /// 400, or 422 naming this field.
    MalformedOrInvalid(String),
    /// 413.
    TooLarge,
}

/// Whether a 422 names `field`. A name longer than 64 characters is
/// echoed cut to its first 64 and an ellipsis, never at full length.
fn names(r: &Resp, field: &str) -> bool {
    if field.chars().count() > 64 {
        let echoed = field.chars().take(64).collect::<String>() + "…";
        return !r.errors(&echoed).is_empty() && r.text.len() < 4096;
    }
    !r.errors(field).is_empty()
}

/// What is wrong with the answer to a refused request, if anything.
fn problem(r: &Resp, want: &Want) -> Option<String> {
    if let Some(p) = json_error_problem(r) {
        return Some(p);
    }
    let ok = match want {
        Want::Malformed => r.status == 400,
        Want::TooLarge => r.status == 413,
        Want::Invalid(field) => r.status == 422 && names(r, field),
        Want::MalformedOrInvalid(field) => r.status == 400 || (r.status == 422 && names(r, field)),
    };
    (!ok).then(|| {
        let want = match want {
            Want::Malformed => "400".to_string(),
            Want::TooLarge => "413".to_string(),
            Want::Invalid(f) => format!("422 naming {}", short(f)),
            Want::MalformedOrInvalid(f) => format!("400, or 422 naming {}", short(f)),
        };
        format!("want {want}, got {}: {}", r.status, short(&r.text))
    })
}

#[track_caller]
fn check(r: &Resp, want: &Want, what: &str) {
    if let Some(p) = problem(r, want) {
        panic!("{what}: {p}");
    }
}

struct Case {
    label: String,
    body: String,
    want: Want,
}

fn case(label: impl Into<String>, body: impl Into<String>, want: Want) -> Case {
    Case {
        label: label.into(),
        body: body.into(),
        want,
    }
}

/// A write endpoint and a valid body for it; each case breaks one thing.
struct Endpoint<'a> {
    t: &'a Tenant,
    method: &'static str,
    path: String,
    key: &'static str,
    /// A valid inner object.
    base: Value,
    /// A text field of the resource and its maximum length in characters.
    text: &'static str,
    text_max: usize,
    /// The list (with change logs where the resource has them) that must
    /// read the same after every refused request.
    list: String,
    plural: &'static str,
}

impl Endpoint<'_> {
    /// The inner object with `field` set to the JSON text `raw`, or removed.
    fn inner(&self, field: &str, raw: Option<&str>) -> String {
        let mut m = self.base.as_object().cloned().unwrap_or_default();
        m.remove(field);
        let rest = Value::Object(m).to_string();
        match raw {
            None => rest,
            Some(raw) if rest == "{}" => format!("{{\"{field}\":{raw}}}"),
            Some(raw) => format!("{{\"{field}\":{raw},{}", &rest[1..]),
        }
    }
    fn body(&self, field: &str, raw: Option<&str>) -> String {
        format!("{{\"{}\":{}}}", self.key, self.inner(field, raw))
    }
    fn valid(&self) -> String {
        json!({ self.key: self.base }).to_string()
    }
    /// `field` set to the JSON text `raw`: refused, naming the field.
    fn raw(&self, field: &str, raw: &str) -> Case {
        case(
            format!("{field} = {}", short(raw)),
            self.body(field, Some(raw)),
            Want::Invalid(field.into()),
        )
    }
    fn set(&self, field: &str, value: Value) -> Case {
        self.raw(field, &value.to_string())
    }
    fn sets(&self, field: &str, values: &[Value]) -> Vec<Case> {
        values.iter().map(|v| self.set(field, v.clone())).collect()
    }
    fn missing(&self, field: &str) -> Case {
        case(
            format!("{field} missing"),
            self.body(field, None),
            Want::Invalid(field.into()),
        )
    }
    /// Missing, empty and null.
    fn required(&self, fields: &[&str]) -> Vec<Case> {
        fields
            .iter()
            .flat_map(|f| [self.missing(f), self.set(f, json!("")), self.set(f, Value::Null)])
            .collect()
    }
    /// System fields the client may not set.
    fn read_only(&self, fields: &[&str]) -> Vec<Case> {
        let values = [
            ("id", json!("0190a0b0c0d0e0f0a0b0c0d0e0f0a0b0")),
            ("created_ts", json!(1_700_000_000)),
            ("modified_ts", json!(1_700_000_000)),
        ];
        fields
            .iter()
            .map(|f| {
                let v = values
                    .iter()
                    .find(|(n, _)| n == f)
                    .map(|(_, v)| v.clone())
                    .unwrap_or(json!("x"));
                self.set(f, v)
            })
            .collect()
    }
    /// Values that are no string: objects, arrays, floats, booleans and
    /// numbers beyond any integer.
    fn not_text(&self, field: &str) -> Vec<Case> {
        let mut cases: Vec<Case> = [
            "{}",
            "{\"a\":\"b\"}",
            "[]",
            "[\"x\"]",
            "1.5",
            "-0.25",
            "true",
            "false",
            "99999999999999999999999",
        ]
        .iter()
        .map(|raw| self.raw(field, raw))
        .collect();
        cases.push(case(
            format!("{field} = 1e400"),
            self.body(field, Some("1e400")),
            Want::MalformedOrInvalid(field.into()),
        ));
        cases
    }
    /// `max + 1` characters of multibyte text (fewer would fit in bytes).
    fn too_long(&self, field: &str, max: usize) -> Case {
        self.set(field, json!("😀".repeat(max + 1)))
    }
    fn nul(&self, field: &str) -> Case {
        self.set(field, json!("before\u{0}after"))
    }
    /// Integers out of range, as text, as floats and beyond i64.
    fn not_int(&self, field: &str) -> Vec<Case> {
        let mut cases: Vec<Case> = [
            "\"abc\"",
            "\"1.5\"",
            "1.5",
            "1.0",
            "{}",
            "[]",
            "[1]",
            "99999999999999999999",
            "18446744073709551615",
            "-9223372036854775809",
        ]
        .iter()
        .map(|raw| self.raw(field, raw))
        .collect();
        cases.push(case(
            format!("{field} = 1e400"),
            self.body(field, Some("1e400")),
            Want::MalformedOrInvalid(field.into()),
        ));
        cases
    }

    /// Broken bodies every write endpoint must refuse the same way.
    fn structural(&self) -> Vec<Case> {
        use Want::*;
        let k = self.key;
        let f = self.text;
        let valid = self.valid();
        let invalid = |field: &str| Invalid(field.to_string());
        let mut many_unknown = self.base.as_object().cloned().unwrap_or_default();
        for i in 0..3000 {
            many_unknown.insert(format!("zz_unknown_field_{i}"), json!(i));
        }
        let long_name = "x".repeat(70_000);
        vec![
            case("empty body", "", Malformed),
            case("whitespace body", " \n\t ", Malformed),
            case("unterminated object", "{", Malformed),
            case("truncated envelope", format!("{{\"{k}\":{{"), Malformed),
            case("array", "[]", Malformed),
            case("array of the envelope", format!("[{valid}]"), Malformed),
            case("string", "\"x\"", Malformed),
            case("null", "null", Malformed),
            case("number", "42", Malformed),
            case("boolean", "true", Malformed),
            case("trailing garbage", format!("{valid} x"), Malformed),
            case("two documents", format!("{valid}{valid}"), Malformed),
            case("single quotes", format!("{{'{k}':{{}}}}"), Malformed),
            case("trailing comma", format!("{{\"{k}\":{{}},}}"), Malformed),
            case("comment", format!("// hi\n{valid}"), Malformed),
            case("NaN", self.body(f, Some("NaN")), Malformed),
            case("Infinity", self.body(f, Some("-Infinity")), Malformed),
            case("bad escape", self.body(f, Some("\"\\x41\"")), Malformed),
            case(
                "raw control character",
                self.body(f, Some("\"a\u{1}b\"")),
                Malformed,
            ),
            case(
                "deep nesting",
                self.body(
                    f,
                    Some(&format!("{}{}", "[".repeat(100_000), "]".repeat(100_000))),
                ),
                Malformed,
            ),
            case(
                "lone high surrogate",
                self.body(f, Some("\"a\\ud800b\"")),
                MalformedOrInvalid(f.into()),
            ),
            case(
                "lone low surrogate",
                self.body(f, Some("\"\\udc00\"")),
                MalformedOrInvalid(f.into()),
            ),
            case("no envelope", "{}", invalid(k)),
            case(
                "plural envelope",
                format!("{{\"{k}s\":{}}}", self.base),
                Invalid(k.into()),
            ),
            case("envelope is a string", format!("{{\"{k}\":\"x\"}}"), invalid(k)),
            case(
                "envelope is an array",
                format!("{{\"{k}\":[{}]}}", self.base),
                invalid(k),
            ),
            case("envelope is null", format!("{{\"{k}\":null}}"), invalid(k)),
            case("envelope is a number", format!("{{\"{k}\":1}}"), invalid(k)),
            case("envelope is a boolean", format!("{{\"{k}\":true}}"), invalid(k)),
            case(
                "extra top-level member",
                format!("{{\"{k}\":{},\"junk\":1}}", self.base),
                invalid("junk"),
            ),
            self.raw("no_such_field", "\"x\""),
            case(
                "unknown field with a 70000-character name",
                self.body(&long_name, Some("1")),
                Invalid(long_name.clone()),
            ),
            case(
                "3000 unknown fields",
                json!({ k: Value::Object(many_unknown) }).to_string(),
                invalid("zz_unknown_field_0"),
            ),
            self.nul(f),
            self.too_long(f, self.text_max),
            case(
                "900 KB string",
                self.body(f, Some(&format!("\"{}\"", "a".repeat(900_000)))),
                invalid(f),
            ),
            case(
                "body over 1 MiB",
                self.body(f, Some(&format!("\"{}\"", "a".repeat(OVER_LIMIT)))),
                TooLarge,
            ),
        ]
    }

    fn snapshot(&self) -> Value {
        let r = self.t.get(&self.list).expect(200);
        let total = r.body["meta"]["pagination"]["totalCount"].clone();
        assert!(total.as_u64().is_some_and(|n| n <= 100), "snapshot fits one page");
        json!({ "records": r.body[self.plural], "total": total })
    }

    /// Sends every case, checks its answer and that nothing changed; then
    /// checks that the untouched base body is accepted, so each refusal was
    /// for the broken part alone. Reports every failing case at once.
    fn run(&self, cases: Vec<Case>) {
        let failures = self.failures(&cases);
        assert!(
            failures.is_empty(),
            "{} of {} cases failed:\n{}",
            failures.len(),
            cases.len(),
            failures.join("\n")
        );
    }

    /// What `run` checks, as a list of failures.
    fn failures(&self, cases: &[Case]) -> Vec<String> {
        let mut before = self.snapshot();
        let mut failures = Vec::new();
        let at = format!("{} {}", self.method, self.path);
        for c in cases {
            let r = self.t.send(self.method, &self.path, Some(&c.body));
            if let Some(p) = problem(&r, &c.want) {
                failures.push(format!("{at} [{}] {p}", c.label));
            }
            let after = self.snapshot();
            if after != before {
                failures.push(format!(
                    "{at} [{}] a refused request left a write behind (answer {})",
                    c.label, r.status
                ));
                before = after;
            }
        }
        let r = self.t.send(self.method, &self.path, Some(&self.valid()));
        if r.status != 200 && r.status != 201 {
            failures.push(format!(
                "{at}: the base body is valid, yet got {}: {}",
                r.status,
                short(&r.text)
            ));
        }
        failures
    }
}

/// Per-field cases shared by contact creates and updates.
fn contact_field_cases(e: &Endpoint) -> Vec<Case> {
    let mut c = Vec::new();
    for (field, max) in [
        ("first_name", 64),
        ("company_name", 64),
        ("account_number", 32),
        ("contact_api_id", 36),
        ("contact_balance", 12),
        ("contact_c1", 128),
        ("contact_c2", 128),
        ("contact_c3", 128),
        ("address", 255),
        ("city", 100),
        ("header_message", 250),
    ] {
        c.push(e.too_long(field, max));
    }
    c.extend(e.not_text("first_name"));
    c.extend(e.not_text("city"));
    c.push(e.nul("contact_c2"));
    c.push(e.nul("address"));
    c.extend(e.sets(
        "state",
        &[
            json!("T"),
            json!("TEX"),
            json!("T1"),
            json!("12"),
            json!(12),
            json!("T\u{0}"),
        ],
    ));
    c.extend(e.sets(
        "zip",
        &[
            json!("123"),
            json!("1234567890123"),
            json!("12345'; --"),
            json!("12345_6789"),
            json!("12345\u{0}"),
            json!(1234.5),
        ],
    ));
    c.extend(e.sets(
        "email",
        &[
            json!("no-at-sign"),
            json!("a@b"),
            json!("a b@example.com"),
            json!("a@@example.com"),
            json!("@example.com"),
            json!("a@.com"),
            json!(12345),
            json!(format!("{}@ex.co", "a".repeat(59))),
            json!("a@example.com\u{0}"),
        ],
    ));
    c.extend(e.sets(
        "email_trx_receipt",
        &[
            json!(2),
            json!(-1),
            json!("yes"),
            json!(1.5),
            json!([]),
            json!({}),
        ],
    ));
    c.extend(e.sets(
        "home_phone",
        &[
            json!("512555010"),
            json!("51255501000"),
            json!("512-555-01"),
            json!("５１２５５５０１００"),
            json!(5125550100.0),
        ],
    ));
    c.push(e.set("cell_phone", json!("abcdefghij")));
    c.push(e.set("office_phone", json!("+151255501")));
    c.extend(e.sets("office_ext_phone", &[json!("12345678901"), json!("12a")]));
    c.extend(e.sets(
        "date_of_birth",
        &[
            json!("2023-02-29"),
            json!("1980-13-01"),
            json!("1980-00-10"),
            json!("1980-02-30"),
            json!("1980-1-1"),
            json!("01/02/1980"),
            json!("19800101"),
            json!(19800101),
            json!("1980-01-01T00:00:00Z"),
            json!("0000-00-00"),
            json!("1980-01-01\u{0}"),
            json!({}),
        ],
    ));
    c.extend(e.sets("header_message_type", &[json!(-1), json!(5)]));
    c.extend(e.not_int("header_message_type"));
    c
}

fn post_contacts_rejects_bad_bodies(app: &TestApp) {
    let t = app.bootstrap();
    let other = app.bootstrap();
    t.contact(json!({ "first_name": "Existing" }));
    let e = Endpoint {
        t: &t,
        method: "POST",
        path: "/v2/contacts".into(),
        key: "contact",
        base: json!({ "location_id": t.location_id(), "last_name": "Doe" }),
        text: "last_name",
        text_max: 64,
        list: "/v2/contacts?page_size=100&expand=changelogs".into(),
        plural: "contacts",
    };
    let mut cases = e.structural();
    cases.extend(e.read_only(&[
        "id",
        "created_ts",
        "modified_ts",
        "created_user_id",
        "modified_user_id",
    ]));
    cases.extend(e.required(&["location_id", "last_name"]));
    cases.extend(e.sets(
        "location_id",
        &[
            json!(other.location_id()),
            json!(ROOT),
            json!("not-an-id"),
            json!("'; DROP TABLE contacts; --"),
            json!(123),
            json!({}),
            json!([t.location_id()]),
        ],
    ));
    cases.extend(e.not_text("last_name"));
    cases.extend(e.sets("update_if_exists", &[json!(2), json!("yes"), json!(1.5)]));
    cases.extend(contact_field_cases(&e));
    e.run(cases);
}

fn put_contacts_rejects_bad_bodies(app: &TestApp) {
    let t = app.bootstrap();
    let c = t.contact(json!({ "first_name": "Target", "contact_api_id": "target-1" }));
    t.contact(json!({ "first_name": "Other", "contact_api_id": "taken-1" }));
    let id = c["id"].as_str().unwrap();
    let e = Endpoint {
        t: &t,
        method: "PUT",
        path: format!("/v2/contacts/{id}"),
        key: "contact",
        base: json!({}),
        text: "last_name",
        text_max: 64,
        list: "/v2/contacts?page_size=100&expand=changelogs".into(),
        plural: "contacts",
    };
    let mut cases = e.structural();
    let child = t.location(&t.location_id(), "Elsewhere");
    cases.extend(e.read_only(&[
        "id",
        "created_ts",
        "modified_ts",
        "created_user_id",
        "modified_user_id",
        "update_if_exists",
    ]));
    // Another location, or no id at all; the stored value itself may be
    // resent (reference_samples::a_put_may_resend_what_cannot_change).
    cases.extend(e.sets("location_id", &[json!(child), json!("nope")]));
    cases.extend(e.sets("last_name", &[json!(""), Value::Null]));
    cases.extend(e.not_text("last_name"));
    cases.push(e.set("contact_api_id", json!("taken-1")));
    cases.extend(contact_field_cases(&e));
    e.run(cases);
}

/// Per-field cases shared by location creates and updates.
fn location_field_cases(e: &Endpoint, t: &Tenant) -> Vec<Case> {
    let mut c = Vec::new();
    for (field, max) in [
        ("name", 64),
        ("account_number", 32),
        ("address1", 32),
        ("address2", 32),
        ("city", 100),
        ("state", 100),
        ("dda", 32),
        ("receipt_logo", 256),
        ("location_c1", 128),
        ("location_c2", 128),
        ("location_c3", 128),
    ] {
        c.push(e.too_long(field, max));
    }
    c.extend(e.not_text("name"));
    c.push(e.nul("address1"));
    c.extend(e.sets(
        "branding_domain_url",
        &[
            json!(""),
            json!("javascript:alert(1)"),
            json!("http://exa mple.com"),
            json!("<script>alert(1)</script>"),
            json!("pay.example.com\u{0}"),
            json!(1.5),
            json!({}),
        ],
    ));
    c.extend(e.sets(
        "zip_code",
        &[json!("1234"), json!("12345678901"), json!("12345;--")],
    ));
    c.extend(e.sets(
        "office_phone",
        &[json!("123"), json!("12345678901"), json!("abcdefghij")],
    ));
    c.push(e.set("fax", json!("12345")));
    c.push(e.set("office_ext_phone", json!("12345678901")));
    c.extend(e.sets(
        "aba",
        &[json!("12345678"), json!("1234567890"), json!("12345678a")],
    ));
    c.push(e.set("dda", json!("12")));
    c.extend(e.sets(
        "tz",
        &[
            json!("Mars/Olympus"),
            json!("America/New_York'; --"),
            json!("Pacific/Kiritimati\u{0}"),
            json!("../../etc/passwd"),
            json!(123),
            json!({}),
        ],
    ));
    c.extend(e.sets(
        "email_reply_to",
        &[
            json!("bad"),
            json!("a@b"),
            json!(format!("{}@ex.co", "a".repeat(55))),
        ],
    ));
    c.extend(e.sets("location_api_id", &[json!("short"), json!("l".repeat(37))]));
    c.extend(e.sets(
        "default_cc",
        &[json!(t.cred("cc_product_transaction_id")), json!("nope")],
    ));
    c.push(e.set("default_ach", json!(t.cred("ach_product_transaction_id"))));
    c.push(e.set("branding_domain_id", json!("not an id")));
    c.push(e.set("developer_company_id", json!("'; --")));
    c.extend(e.sets("contact_email_trx_receipt_default", &[json!(2), json!("yes")]));
    c.push(e.set("show_contact_notes", json!(5)));
    c.push(e.set("show_contact_files", json!("maybe")));
    c.push(e.set("recurring_notification_days_default", json!(-1)));
    c.extend(e.not_int("recurring_notification_days_default"));
    c
}

fn post_locations_rejects_bad_bodies(app: &TestApp) {
    let t = app.bootstrap();
    let other = app.bootstrap();
    let e = Endpoint {
        t: &t,
        method: "POST",
        path: "/v2/locations".into(),
        key: "location",
        base: json!({ "parent_id": t.location_id(), "name": "Branch", "branding_domain_url": "pay.example.com" }),
        text: "name",
        text_max: 64,
        list: "/v2/locations?page_size=100&expand=changelogs".into(),
        plural: "locations",
    };
    let mut cases = e.structural();
    cases.extend(e.read_only(&[
        "id",
        "created_ts",
        "modified_ts",
        "location_api_key",
        "ticket_hash_key",
        "path",
        "created_user_id",
    ]));
    cases.extend(e.required(&["parent_id", "name", "branding_domain_url"]));
    cases.extend(e.sets(
        "parent_id",
        &[
            json!(other.location_id()),
            json!(ROOT),
            json!("nope"),
            json!(42),
            json!([t.location_id()]),
        ],
    ));
    cases.extend(location_field_cases(&e, &t));
    e.run(cases);
}

fn put_locations_rejects_bad_bodies(app: &TestApp) {
    let t = app.bootstrap();
    let other = app.bootstrap();
    let loc = t.location_id();
    let child = t.location(&loc, "Child");
    let grandchild = t.location(&child, "Grandchild");
    let e = Endpoint {
        t: &t,
        method: "PUT",
        path: format!("/v2/locations/{child}"),
        key: "location",
        base: json!({ "parent_id": loc, "name": "Child" }),
        text: "name",
        text_max: 64,
        list: "/v2/locations?page_size=100&expand=changelogs".into(),
        plural: "locations",
    };
    let mut cases = e.structural();
    cases.extend(e.read_only(&[
        "id",
        "created_ts",
        "modified_ts",
        "location_api_key",
        "ticket_hash_key",
        "path",
    ]));
    // An update may leave parent_id and name out (partial PUT), never
    // blank them.
    for f in ["parent_id", "name"] {
        cases.extend([e.set(f, json!("")), e.set(f, Value::Null)]);
    }
    cases.extend(e.sets(
        "parent_id",
        &[
            json!(child),
            json!(grandchild),
            json!(other.location_id()),
            json!(ROOT),
            json!("nope"),
        ],
    ));
    cases.extend(location_field_cases(&e, &t));
    let mut failures = e.failures(&cases);

    // The caller's own location: it cannot move, and its default product
    // transactions must be its own of the right payment method.
    let own = t.get(&format!("/v2/locations/{loc}")).expect(200).body["location"].clone();
    let e = Endpoint {
        path: format!("/v2/locations/{loc}"),
        base: json!({ "parent_id": own["parent_id"], "name": own["name"] }),
        ..e
    };
    let cases = vec![
        e.set("parent_id", json!(child)),
        e.set("default_cc", json!(t.cred("ach_product_transaction_id"))),
        e.set("default_ach", json!(t.cred("cc_product_transaction_id"))),
    ];
    failures.extend(e.failures(&cases));
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

fn post_notes_rejects_bad_bodies(app: &TestApp) {
    let t = app.bootstrap();
    let other = app.bootstrap();
    let cid = t.contact(json!({}))["id"].as_str().unwrap().to_string();
    let other_cid = other.contact(json!({}))["id"].as_str().unwrap().to_string();
    t.post(
        "/v2/notes",
        json!({ "note": { "resource": "Contact", "resource_id": cid, "note": "first" } }),
    )
    .expect(201);
    let e = Endpoint {
        t: &t,
        method: "POST",
        path: "/v2/notes".into(),
        key: "note",
        base: json!({ "resource": "Contact", "resource_id": cid, "note": "hello" }),
        text: "note",
        text_max: 16384,
        list: "/v2/notes?page_size=100&expand=changelogs".into(),
        plural: "notes",
    };
    let mut cases = e.structural();
    cases.extend(e.read_only(&[
        "id",
        "created_ts",
        "modified_ts",
        "location_id",
        "created_user_id",
    ]));
    cases.extend(e.required(&["resource", "resource_id"]));
    cases.extend(e.sets(
        "resource",
        &[
            json!("Transaction"),
            json!("Contact'; --"),
            json!("c".repeat(33)),
            json!(1.5),
            json!({}),
        ],
    ));
    cases.extend(e.sets(
        "resource_id",
        &[
            json!("nope"),
            json!(other_cid),
            json!(other.location_id()),
            json!(t.location_id()),
            json!(7),
            json!({}),
        ],
    ));
    cases.push(case(
        "a contact id named as a Location",
        json!({ "note": { "resource": "Location", "resource_id": cid, "note": "x" } }).to_string(),
        Want::Invalid("resource_id".into()),
    ));
    cases.extend(e.not_text("note"));
    cases.extend(e.not_text("visibility_group_id"));
    e.run(cases);
}

fn put_notes_rejects_bad_bodies(app: &TestApp) {
    let t = app.bootstrap();
    let cid = t.contact(json!({}))["id"].as_str().unwrap().to_string();
    let note = t
        .post(
            "/v2/notes",
            json!({ "note": { "resource": "Contact", "resource_id": cid, "note": "first" } }),
        )
        .expect(201)
        .body["note"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let e = Endpoint {
        t: &t,
        method: "PUT",
        path: format!("/v2/notes/{note}"),
        key: "note",
        base: json!({}),
        text: "note",
        text_max: 16384,
        list: "/v2/notes?page_size=100&expand=changelogs".into(),
        plural: "notes",
    };
    let mut cases = e.structural();
    cases.extend(e.read_only(&[
        "id",
        "created_ts",
        "modified_ts",
        "location_id",
        "created_user_id",
    ]));
    cases.extend(e.not_text("note"));
    cases.extend(e.not_text("visibility_group_id"));
    e.run(cases);
}

fn post_users_rejects_bad_bodies(app: &TestApp) {
    let t = app.bootstrap();
    let other = app.bootstrap();
    let me = t.get("/v2/users/me").expect(200).body["user"].clone();
    let e = Endpoint {
        t: &t,
        method: "POST",
        path: "/v2/users".into(),
        key: "user",
        base: json!({ "primary_location_id": t.location_id(), "username": "bad-input-user", "email": "u@example.com" }),
        text: "username",
        text_max: 64,
        list: "/v2/users?page_size=100&expand=changelogs".into(),
        plural: "users",
    };
    let mut cases = e.structural();
    cases.extend(e.read_only(&[
        "id",
        "created_ts",
        "modified_ts",
        "api_key_hash",
        "hash_key_enc",
        "created_user_id",
    ]));
    cases.extend(e.required(&["primary_location_id", "username"]));
    cases.extend(e.sets(
        "primary_location_id",
        &[json!(other.location_id()), json!(ROOT), json!("nope"), json!(5)],
    ));
    cases.push(e.set("username", me["username"].clone()));
    cases.extend(e.not_text("username"));
    cases.extend(user_field_cases(&e));
    cases.extend(e.sets(
        "user_api_key",
        &[
            json!("short"),
            json!("k".repeat(65)),
            json!(123),
            json!({}),
            json!("k\u{0}".repeat(12)),
        ],
    ));
    cases.extend(e.sets("user_hash_key", &[json!("short"), json!("h".repeat(65))]));
    e.run(cases);
}

/// Per-field cases shared by user creates and updates.
fn user_field_cases(e: &Endpoint) -> Vec<Case> {
    let mut c = vec![e.too_long("email", 128), e.nul("first_name")];
    c.extend(e.sets(
        "email",
        &[
            json!("bad"),
            json!("a@b"),
            json!(format!("{}@ex.co", "a".repeat(124))),
            json!(12345),
            json!([]),
        ],
    ));
    c.extend(e.not_text("first_name"));
    c.extend(e.not_text("last_name"));
    c.extend(e.not_int("user_type_id"));
    c.push(e.set("user_type_id", json!(-1)));
    c.extend(e.sets("status", &[json!(2), json!(-1), json!("active")]));
    c.extend(e.not_int("status"));
    c.extend(e.sets(
        "tz",
        &[
            json!("Mars/Olympus"),
            json!("America/Argentina/Buenos_Aire5"),
            json!("Europe/Berlin\u{0}"),
            json!(1),
        ],
    ));
    c.extend(e.sets("locale", &[json!("en-US-xyz"), json!("ł".repeat(9))]));
    c
}

fn put_users_rejects_bad_bodies(app: &TestApp) {
    let t = app.bootstrap();
    let me = t.get("/v2/users/me").expect(200).body["user"].clone();
    let (uid, _) = t.user(&t.location_id(), None);
    let e = Endpoint {
        t: &t,
        method: "PUT",
        path: format!("/v2/users/{uid}"),
        key: "user",
        base: json!({}),
        text: "username",
        text_max: 64,
        list: "/v2/users?page_size=100&expand=changelogs".into(),
        plural: "users",
    };
    let mut cases = e.structural();
    cases.extend(e.read_only(&[
        "id",
        "created_ts",
        "modified_ts",
        "api_key_hash",
        "hash_key_enc",
        "created_user_id",
    ]));
    cases.extend(e.sets("username", &[json!(""), Value::Null, me["username"].clone()]));
    cases.extend(e.not_text("username"));
    cases.extend(user_field_cases(&e));
    e.run(cases);
}

fn post_authroleusers_rejects_bad_bodies(app: &TestApp) {
    let t = app.bootstrap();
    let other = app.bootstrap();
    let (uid, _) = t.user(&t.location_id(), Some("132"));
    let e = Endpoint {
        t: &t,
        method: "POST",
        path: "/v2/authroleusers".into(),
        key: "authroleuser",
        base: json!({ "user_id": uid, "auth_role_id": "2" }),
        text: "auth_role_id",
        text_max: 11,
        list: "/v2/authroleusers?page_size=100".into(),
        plural: "authroleusers",
    };
    let mut cases = e.structural();
    cases.extend(e.read_only(&[
        "id",
        "created_ts",
        "modified_ts",
        "location_id",
        "created_user_id",
    ]));
    cases.extend(e.required(&["user_id", "auth_role_id"]));
    cases.extend(e.sets(
        "user_id",
        &[
            json!("nope"),
            json!(other.user_id()),
            json!(t.location_id()),
            json!(5),
            json!({}),
            json!([uid]),
        ],
    ));
    cases.extend(e.sets(
        "auth_role_id",
        &[
            json!("999"),
            json!("0"),
            json!("-1"),
            json!("1; DROP TABLE roles"),
            json!("' OR 1=1 --"),
            json!("1".repeat(12)),
            json!("132"),
        ],
    ));
    cases.extend(e.not_text("auth_role_id"));
    e.run(cases);
}

/// Creates, reads back and finds by filter records holding SQL-looking,
/// emoji and right-to-left strings: all stored byte for byte.
fn hostile_strings_are_stored_verbatim(app: &TestApp) {
    let t = app.bootstrap();
    let loc = t.location_id();
    let mut failures = Failures::default();
    for s in SQLISH.iter().chain(UNICODE) {
        let c = t
            .post(
                "/v2/contacts",
                json!({ "contact": { "location_id": loc, "last_name": s, "first_name": s, "contact_c1": s, "address": s, "header_message": s } }),
            )
            .expect(201);
        let c = &c.body["contact"];
        let id = c["id"].as_str().unwrap();
        for f in [
            "last_name",
            "first_name",
            "contact_c1",
            "address",
            "header_message",
        ] {
            assert_eq!(c[f], *s, "{f} echoed verbatim");
        }
        let read = t.get(&format!("/v2/contacts/{id}")).expect(200);
        assert_eq!(read.body["contact"], *c, "read back verbatim: {s}");
        let updated = t
            .put(
                &format!("/v2/contacts/{id}"),
                json!({ "contact": { "city": s, "company_name": s } }),
            )
            .expect(200);
        assert_eq!(updated.body["contact"]["city"], *s);
        let read = t.get(&format!("/v2/contacts/{id}")).expect(200);
        assert_eq!(read.body["contact"]["company_name"], *s);
        let found = t.get(&format!("/v2/contacts?last_name={}", enc(s))).expect(200);
        let hits = found.body["contacts"].as_array().unwrap();
        if !hits.iter().any(|h| h["id"] == id) {
            failures.add(
                &format!("last_name={s:?}"),
                Some(format!("the filter misses its record: {}", short(&found.text))),
            );
        }
        for h in hits {
            let name = h["last_name"].as_str().unwrap().to_lowercase();
            if !name.contains(&s.to_lowercase()) {
                failures.add(&format!("last_name={s:?}"), Some(format!("matched {name:?}")));
            }
        }

        let l = t
            .post(
                "/v2/locations",
                json!({ "location": { "parent_id": loc, "name": s, "city": s, "location_c1": s, "branding_domain_url": "pay.example.com" } }),
            )
            .expect(201);
        let lid = l.body["location"]["id"].as_str().unwrap();
        let read = t.get(&format!("/v2/locations/{lid}")).expect(200);
        assert_eq!(read.body["location"]["name"], *s);
        assert_eq!(read.body["location"]["location_c1"], *s);

        let n = t
            .post(
                "/v2/notes",
                json!({ "note": { "resource": "Contact", "resource_id": id, "note": s } }),
            )
            .expect(201);
        let nid = n.body["note"]["id"].as_str().unwrap();
        assert_eq!(
            t.get(&format!("/v2/notes/{nid}")).expect(200).body["note"]["note"],
            *s
        );

        let u = t
            .post(
                "/v2/users",
                json!({ "user": { "primary_location_id": loc, "username": format!("u{}{s}", &uuid::Uuid::new_v4().simple().to_string()[..8]), "first_name": s, "last_name": s } }),
            )
            .expect(201);
        let uid = u.body["user"]["id"].as_str().unwrap();
        let read = t.get(&format!("/v2/users/{uid}")).expect(200);
        assert_eq!(read.body["user"]["first_name"], *s);
        assert_eq!(read.body["user"]["last_name"], *s);
        assert!(read.body["user"]["username"].as_str().unwrap().ends_with(s));
    }
    // Every table is still there and holds what was written.
    let n = (SQLISH.len() + UNICODE.len()) as u64;
    for (path, at_least) in [
        ("/v2/contacts", n),
        ("/v2/locations", n + 1),
        ("/v2/notes", n),
        ("/v2/users", n + 1),
        ("/v2/authroleusers", 1),
    ] {
        let r = t.get(path).expect(200);
        assert!(
            r.body["meta"]["pagination"]["totalCount"].as_u64().unwrap() >= at_least,
            "{path}: {}",
            r.text
        );
    }
    failures.assert_none("filters on stored hostile strings");
}

/// Lengths count characters (Unicode scalar values), not bytes or UTF-16
/// units: exactly the maximum passes, one more fails.
fn lengths_count_characters(app: &TestApp) {
    let t = app.bootstrap();
    let loc = t.location_id();
    let chars = ["ł", "😀", "字", "é", "ש"];
    let fields = [
        ("last_name", 64),
        ("first_name", 64),
        ("company_name", 64),
        ("account_number", 32),
        ("contact_api_id", 36),
        ("contact_balance", 12),
        ("contact_c1", 128),
        ("contact_c2", 128),
        ("contact_c3", 128),
        ("address", 255),
        ("city", 100),
        ("header_message", 250),
    ];
    let mut body = json!({ "location_id": loc, "email": format!("{}@ex.co", "a".repeat(58)) });
    for (i, (f, max)) in fields.iter().enumerate() {
        body[*f] = json!(chars[i % chars.len()].repeat(*max));
    }
    let c = t.post("/v2/contacts", json!({ "contact": body })).expect(201);
    let id = c.body["contact"]["id"].as_str().unwrap().to_string();
    let read = t.get(&format!("/v2/contacts/{id}")).expect(200);
    for (f, _) in fields {
        assert_eq!(read.body["contact"][f], body[f], "{f} at its maximum");
    }
    assert_eq!(read.body["contact"]["email"], body["email"]);
    for (i, &(f, max)) in fields.iter().enumerate() {
        let long = chars[i % chars.len()].repeat(max + 1);
        let r = t.post(
            "/v2/contacts",
            json!({ "contact": { "location_id": loc, "last_name": "X", f: long } }),
        );
        check(&r, &Want::Invalid(f.to_string()), &format!("{f} one over"));
        let r = t.put(&format!("/v2/contacts/{id}"), json!({ "contact": { f: long } }));
        check(&r, &Want::Invalid(f.to_string()), &format!("{f} one over on PUT"));
    }
    let long_email = format!("{}@ex.co", "a".repeat(59));
    check(
        &t.put(
            &format!("/v2/contacts/{id}"),
            json!({ "contact": { "email": long_email } }),
        ),
        &Want::Invalid("email".into()),
        "email of 65",
    );
    assert_eq!(
        t.get(&format!("/v2/contacts/{id}")).expect(200).body["contact"],
        read.body["contact"],
        "refused updates change nothing"
    );
    assert_eq!(t.get("/v2/contacts").body["meta"]["pagination"]["totalCount"], 1);

    // Locations, notes and users the same way.
    let l = t
        .post(
            "/v2/locations",
            json!({ "location": { "parent_id": loc, "name": "😀".repeat(64), "branding_domain_url": "pay.example.com",
                "address1": "ł".repeat(32), "city": "字".repeat(100), "state": "é".repeat(100), "dda": "ש".repeat(32),
                "receipt_logo": "😀".repeat(256), "location_c3": "ł".repeat(128),
                "email_reply_to": format!("{}@ex.co", "r".repeat(54)) } }),
        )
        .expect(201);
    assert_eq!(l.body["location"]["name"], "😀".repeat(64));
    let lid = l.body["location"]["id"].as_str().unwrap();
    check(
        &t.put(
            &format!("/v2/locations/{lid}"),
            json!({ "location": { "parent_id": loc, "name": "😀".repeat(65) } }),
        ),
        &Want::Invalid("name".into()),
        "location name of 65",
    );
    let n = t
        .post(
            "/v2/notes",
            json!({ "note": { "resource": "Contact", "resource_id": id, "note": "😀".repeat(16384) } }),
        )
        .expect(201);
    let nid = n.body["note"]["id"].as_str().unwrap();
    assert_eq!(
        t.get(&format!("/v2/notes/{nid}")).body["note"]["note"],
        "😀".repeat(16384)
    );
    check(
        &t.put(
            &format!("/v2/notes/{nid}"),
            json!({ "note": { "note": "😀".repeat(16385) } }),
        ),
        &Want::Invalid("note".into()),
        "note of 16385",
    );
    let u = t
        .post(
            "/v2/users",
            json!({ "user": { "primary_location_id": loc, "username": "ü".repeat(64),
                "email": format!("{}@ex.co", "e".repeat(122)), "locale": "ł".repeat(8),
                "tz": "America/Argentina/Buenos_Aires" } }),
        )
        .expect(201);
    assert_eq!(u.body["user"]["username"], "ü".repeat(64));
    assert_eq!(u.body["user"]["tz"], "America/Argentina/Buenos_Aires");
    check(
        &t.post(
            "/v2/users",
            json!({ "user": { "primary_location_id": loc, "username": "ü".repeat(65) } }),
        ),
        &Want::Invalid("username".into()),
        "username of 65",
    );
}

/// The list resources, a field each can be filtered on, and one it cannot.
const LISTS: &[(&str, &str)] = &[
    ("/v2/contacts", "last_name"),
    ("/v2/locations", "name"),
    ("/v2/notes", "note"),
    ("/v2/users", "username"),
    ("/v2/authroleusers", "auth_role_id"),
];

fn bad_list_parameters_are_422(app: &TestApp) {
    let t = app.bootstrap();
    let mut failures = Failures::default();
    for (path, filter) in LISTS {
        let bad: Vec<(&str, &str)> = vec![
            ("page", "0"),
            ("page", "-1"),
            ("page", "abc"),
            ("page", "1.5"),
            ("page_size", "0"),
            ("page_size", "-1"),
            ("page_size", "abc"),
            ("page_size", "101"),
            ("page_size", "1000000"),
            ("page_size", "2.5"),
            ("sort", "no_such_field"),
            ("sort", "-no_such_field"),
            ("sort", "--id"),
            ("sort", "id;DROP TABLE contacts"),
            ("sort", "created_user_id"),
            ("expand", "no_such_expand"),
            ("expand", "created_user,no_such_expand"),
            ("created_ts", "garbage"),
            ("created_ts", "custom"),
            ("created_ts", "1|abc"),
            ("created_ts_from", "abc"),
            ("created_ts_to", "1.5"),
            ("no_such_filter", "1"),
            ("created_user_id", "x"),
            ("api_key_hash", "x"),
            ("location_api_key", "x"),
            ("path", "/"),
        ];
        for (k, v) in bad {
            let r = t.get(&format!("{path}?{k}={}", enc(v)));
            failures.add(
                &format!("GET {path}?{k}={v}"),
                problem(&r, &Want::Invalid(k.to_string())),
            );
        }
        // The refusal of an unknown filter lists the allowed names.
        let r = t.get(&format!("{path}?no_such_filter=1"));
        let msg = r.errors("no_such_filter").join(" ");
        if !(msg.contains(filter) && msg.contains("created_ts")) {
            failures.add(path, Some(format!("the allowed filters are not listed: {msg}")));
        }
    }
    // Integer filters refuse what is no integer.
    for (k, v) in [
        ("header_message_type", "abc"),
        ("header_message_type", "1|x"),
        ("header_message_type", "1.5"),
        ("header_message_type", "99999999999999999999"),
        ("email_trx_receipt", "maybe"),
    ] {
        let r = t.get(&format!("/v2/contacts?{k}={}", enc(v)));
        failures.add(
            &format!("GET /v2/contacts?{k}={v}"),
            problem(&r, &Want::Invalid(k.to_string())),
        );
    }
    failures.assert_none("bad list parameters");
}

fn hostile_filter_values_match_nothing(app: &TestApp) {
    let t = app.bootstrap();
    let c = t.contact(json!({ "first_name": "Ann", "email": "ann@example.com", "city": "Oslo", "date_of_birth": "1980-01-01", "contact_api_id": "api-1" }));
    let cid = c["id"].as_str().unwrap();
    t.post(
        "/v2/notes",
        json!({ "note": { "resource": "Contact", "resource_id": cid, "note": "plain" } }),
    )
    .expect(201);
    let values = [
        "' OR 1=1 --",
        "' OR '1'='1",
        "\" OR \"\"=\"",
        "x'; DROP TABLE contacts; --",
        "' UNION SELECT id, api_key_hash FROM users --",
        "%",
        "_",
        "%%",
        "\\",
        "\\%",
        "*",
        "before\u{0}after",
        "\u{0}",
        "\u{ffff}",
        "😀",
        "Doe\u{0}",
    ];
    let lists: &[(&str, &[&str])] = &[
        (
            "/v2/contacts",
            &[
                "last_name",
                "first_name",
                "email",
                "city",
                "id",
                "location_id",
                "contact_api_id",
                "date_of_birth",
            ],
        ),
        ("/v2/locations", &["name", "id", "parent_id"]),
        ("/v2/notes", &["note", "resource", "resource_id"]),
        ("/v2/users", &["username", "email", "id"]),
        ("/v2/authroleusers", &["auth_role_id", "user_id"]),
    ];
    let mut encoded: Vec<String> = values.iter().map(|v| enc(v)).collect();
    // Raw bytes that are not UTF-8, and a value longer than any field
    // (the URL stays under 64 KiB).
    encoded.extend([
        "%FF%FE".to_string(),
        "%FF%FE%00".to_string(),
        "a%C0%AFb".to_string(),
        "a".repeat(60_000),
    ]);
    let mut failures = Failures::default();
    for (path, fields) in lists {
        let all = t.get(path).expect(200).body["meta"]["pagination"]["totalCount"].clone();
        for f in *fields {
            for v in &encoded {
                let r = t.get(&format!("{path}?{f}={v}"));
                let what = format!("{path}?{f}={}", short(v));
                // No stored value holds a NUL or is that long, so refusing
                // such a value is fine too.
                if (v.contains("%00") || v.len() > 1000) && r.status == 422 {
                    failures.add(&what, problem(&r, &Want::Invalid(f.to_string())));
                } else {
                    failures.no_match(&what, &r);
                }
            }
        }
        assert_eq!(
            t.get(path).expect(200).body["meta"]["pagination"]["totalCount"],
            all,
            "{path} still holds everything"
        );
    }
    // A comma list of hostile values.
    let url = format!("/v2/contacts?last_name={}", enc("' OR 1=1,%,_"));
    failures.no_match(&url, &t.get(&url));
    failures.assert_none("hostile filter values");
    // A huge page is an empty page, not an overflow.
    let r = t.get("/v2/contacts?page=18446744073709551615&page_size=100");
    assert_eq!(r.status, 200, "{}", short(&r.text));
    assert_eq!(r.body["contacts"], json!([]));
    assert_eq!(r.body["meta"]["pagination"]["totalCount"], 1);
}

fn bad_single_read_parameters_are_422(app: &TestApp) {
    let t = app.bootstrap();
    let c = t.contact(json!({}));
    let cid = c["id"].as_str().unwrap();
    let nid = t
        .post(
            "/v2/notes",
            json!({ "note": { "resource": "Contact", "resource_id": cid, "note": "n" } }),
        )
        .expect(201)
        .body["note"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let items = [
        format!("/v2/contacts/{cid}"),
        format!("/v2/locations/{}", t.location_id()),
        format!("/v2/notes/{nid}"),
        format!("/v2/users/{}", t.user_id()),
    ];
    let mut failures = Failures::default();
    for item in &items {
        for (k, v) in [
            ("expand", "no_such_expand"),
            ("expand", "created_user,no_such_expand"),
            ("expand", "' OR 1=1 --"),
            ("no_such_param", "1"),
            ("page", "1"),
            ("sort", "id"),
        ] {
            let r = t.get(&format!("{item}?{k}={}", enc(v)));
            failures.add(
                &format!("GET {item}?{k}={v}"),
                problem(&r, &Want::Invalid(k.to_string())),
            );
        }
        let r = t.get(&format!("{item}?expand=no_such_expand"));
        if !r.errors("expand").join(" ").contains("created_user") {
            failures.add(
                item,
                Some(format!("the allowed expands are not listed: {}", r.text)),
            );
        }
    }
    failures.assert_none("bad single-read parameters");
}

fn bad_ids_in_paths_are_404(app: &TestApp) {
    let t = app.bootstrap();
    let other = app.bootstrap();
    let oc = other.contact(json!({}));
    let other_contact = oc["id"].as_str().unwrap();
    let other_note = other
        .post(
            "/v2/notes",
            json!({ "note": { "resource": "Contact", "resource_id": other_contact, "note": "theirs" } }),
        )
        .expect(201)
        .body["note"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let other_aru = other.get("/v2/authroleusers").expect(200).body["authroleusers"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let junk = [
        "x".repeat(1000),
        "x".repeat(37),
        "x".repeat(23),
        enc("' OR 1=1 --"),
        enc("1; DROP TABLE contacts"),
        enc("ключ-идентификатор-записи-1234"),
        "%00".into(),
        format!("{}%00", "a".repeat(30)),
        "%FF%FE%FD".into(),
        "a%2Fb".into(),
        "%2e%2e".into(),
        "%25".into(),
        "a%20b".into(),
        "0190a0b0c0d0e0f0a0b0c0d0e0f0a0b0".into(),
        ROOT.into(),
    ];
    let resources: &[(&str, Value, Option<&str>)] = &[
        (
            "/v2/contacts",
            json!({ "contact": { "first_name": "x" } }),
            Some(other_contact),
        ),
        (
            "/v2/locations",
            json!({ "location": { "parent_id": t.location_id(), "name": "x" } }),
            Some(&other.location_id()),
        ),
        ("/v2/notes", json!({ "note": { "note": "x" } }), Some(&other_note)),
        (
            "/v2/users",
            json!({ "user": { "first_name": "x" } }),
            Some(&other.user_id()),
        ),
        ("/v2/authroleusers", Value::Null, Some(&other_aru)),
    ];
    let not_found = |r: &Resp| {
        json_error_problem(r)
            .or_else(|| (r.status != 404).then(|| format!("want 404, got {}: {}", r.status, short(&r.text))))
    };
    let mut failures = Failures::default();
    for (path, body, theirs) in resources {
        let mut ids: Vec<String> = junk.to_vec();
        ids.extend(theirs.map(str::to_string));
        for id in &ids {
            let url = format!("{path}/{id}");
            let mut methods = vec![("GET", None), ("DELETE", None)];
            if !body.is_null() {
                methods.push(("PUT", Some(body.to_string())));
            }
            for (m, b) in methods {
                let r = t.send(m, &url, b.as_deref());
                failures.add(&format!("{m} {}", short(&url)), not_found(&r));
            }
        }
    }
    // Addressed by api id, hostile values are merely unknown.
    for id in &junk {
        for m in ["GET", "DELETE"] {
            let url = format!("/v2/contacts/{id}?api_id=1");
            let r = t.send(m, &url, None);
            failures.add(&format!("{m} {}", short(&url)), not_found(&r));
        }
    }
    failures.assert_none("bad ids in paths");
    // Nothing of the other tenant was touched.
    other.get(&format!("/v2/contacts/{other_contact}")).expect(200);
    other.get(&format!("/v2/notes/{other_note}")).expect(200);
    other.get(&format!("/v2/authroleusers/{other_aru}")).expect(200);
    assert_eq!(
        other.get(&format!("/v2/contacts/{other_contact}")).body["contact"],
        oc
    );
}

/// Sends with the tenant's credentials plus extra headers.
fn send_with(t: &Tenant, method: &str, path: &str, extra: &[(&str, &str)], body: Option<&str>) -> Resp {
    let auth = [
        ("developer-id", t.cred("developer_id")),
        ("user-id", t.cred("user_id")),
        ("user-api-key", t.cred("user_api_key")),
    ];
    let mut headers: Vec<(&str, &str)> = auth.iter().map(|(k, v)| (*k, v.as_str())).collect();
    headers.extend_from_slice(extra);
    Client { base: t.base.clone() }.send(method, path, &headers, body)
}

fn error_bodies_carry_the_request_id(app: &TestApp) {
    let t = app.bootstrap();
    let big = json!({ "contact": { "location_id": t.location_id(), "last_name": "a".repeat(OVER_LIMIT) } })
        .to_string();
    let requests: Vec<(&str, &str, Option<String>, u16)> = vec![
        ("POST", "/v2/contacts", Some("{".into()), 400),
        ("POST", "/v2/contacts", Some("{\"contact\":{}}".into()), 422),
        ("GET", "/v2/contacts?page=0", None, 422),
        ("GET", "/v2/contacts/nope", None, 404),
        ("GET", "/v2/no-such-endpoint", None, 404),
        (
            "PUT",
            "/v2/authroleusers/0190a0b0c0d0e0f0a0b0c0d0e0f0a0b0",
            Some("{}".into()),
            405,
        ),
        ("POST", "/v2/contacts", Some(big), 413),
    ];
    for (m, path, body, status) in &requests {
        let what = format!("{m} {path}");
        // The caller's own request id is echoed in the header and the body.
        let r = send_with(&t, m, path, &[("x-request-id", "it-req-42_A")], body.as_deref());
        assert_eq!(r.status, *status, "{what}: {}", short(&r.text));
        assert_json_error(&r, &what);
        assert_eq!(r.header("x-request-id"), Some("it-req-42_A"), "{what}");
        // Unusable ids are replaced, consistently in the header and the body.
        for bad in ["has spaces in it", &"x".repeat(65), "quote\"d", ""] {
            let r = send_with(&t, m, path, &[("x-request-id", bad)], body.as_deref());
            assert_eq!(r.status, *status, "{what}: {}", short(&r.text));
            assert_json_error(&r, &what);
            assert_ne!(r.header("x-request-id"), Some(bad), "{what}");
        }
        // Without credentials: 401, also with the id. (Not for the 1 MiB
        // body: the 401 is answered before the body is read, and a client
        // still uploading may find the connection closed under it.)
        if *status == 413 {
            continue;
        }
        let r = app.client().send(m, path, &[], body.as_deref());
        assert_json_error(&r, &format!("{what} without credentials"));
    }
    // A read-only user is refused writes, with the id too, and writes nothing.
    let (uid, key) = t.user(&t.location_id(), Some("2"));
    let reader = t.as_user(&uid, &key);
    let r = reader.post(
        "/v2/contacts",
        json!({ "contact": { "location_id": t.location_id(), "last_name": "Nope" } }),
    );
    assert_eq!(r.status, 403, "{}", r.text);
    assert_json_error(&r, "a read-only user's POST");
    let r = reader.send("POST", "/v2/contacts", Some("{"));
    assert!(r.status == 400 || r.status == 403, "{}", r.text);
    assert_json_error(&r, "a read-only user's malformed POST");
    assert_eq!(
        t.get("/v2/contacts").expect(200).body["meta"]["pagination"]["totalCount"],
        0
    );
}

fn bad_credentials_are_401(app: &TestApp) {
    let t = app.bootstrap();
    let dev = t.cred("developer_id");
    let uid = t.user_id();
    let key = t.cred("user_api_key");
    let c = app.client();
    let long = "k".repeat(5000);
    let unauthorized = |r: &Resp| {
        json_error_problem(r)
            .or_else(|| (r.status != 401).then(|| format!("want 401, got {}: {}", r.status, short(&r.text))))
    };
    let mut failures = Failures::default();
    let header_sets: Vec<Vec<(&str, &str)>> = vec![
        vec![],
        vec![("developer-id", &dev)],
        vec![("developer-id", &dev), ("user-id", &uid)],
        vec![
            ("developer-id", &dev),
            ("user-id", &uid),
            ("user-api-key", "wrong"),
        ],
        vec![("developer-id", &dev), ("user-id", &uid), ("user-api-key", &long)],
        vec![
            ("developer-id", "' OR 1=1 --"),
            ("user-id", &uid),
            ("user-api-key", &key),
        ],
        vec![
            ("developer-id", &dev),
            ("user-id", "' OR 1=1 --"),
            ("user-api-key", &key),
        ],
        vec![("developer-id", &dev), ("user-id", ROOT), ("user-api-key", &key)],
        vec![
            ("developer-id", &dev),
            ("authorization", "Basic !!!not base64!!!"),
        ],
        vec![("developer-id", &dev), ("authorization", "Basic Og==")],
        vec![("developer-id", &dev), ("authorization", "Bearer x")],
    ];
    for h in &header_sets {
        for (m, path, body) in [
            ("GET", "/v2/contacts", None),
            ("POST", "/v2/contacts", Some("{\"contact\":{}}")),
        ] {
            let r = c.send(m, path, h, body);
            let what = format!(
                "{m} {path} with {:?}",
                h.iter().map(|(k, _)| *k).collect::<Vec<_>>()
            );
            failures.add(&what, unauthorized(&r));
        }
    }
    // Credentials in the query string, with hostile values (already
    // percent-encoded).
    let sql = enc("' OR 1=1 --");
    for (d, u, k) in [
        ("%00", uid.as_str(), key.as_str()),
        ("a%00b", uid.as_str(), key.as_str()),
        ("%FF%FE", uid.as_str(), key.as_str()),
        (sql.as_str(), uid.as_str(), key.as_str()),
        (dev.as_str(), "%00", key.as_str()),
        (dev.as_str(), sql.as_str(), key.as_str()),
        (dev.as_str(), uid.as_str(), "%00"),
        (dev.as_str(), uid.as_str(), sql.as_str()),
    ] {
        let path = format!("/v2/contacts?developer-id={d}&user-id={u}&user-api-key={k}");
        let r = c.send("GET", &path, &[], None);
        failures.add(&path, unauthorized(&r));
    }
    failures.assert_none("bad credentials");
    // The right ones still work.
    t.get("/v2/contacts").expect(200);
}

/// Sends raw bytes with the tenant's credentials, with a Content-Length or
/// chunked.
fn send_bytes(t: &Tenant, method: &str, path: &str, body: &[u8], chunked: bool) -> Resp {
    let agent = ureq::AgentBuilder::new()
        .timeout(std::time::Duration::from_secs(30))
        .build();
    let req = agent
        .request(method, &format!("{}{path}", t.base))
        .set("developer-id", &t.cred("developer_id"))
        .set("user-id", &t.cred("user_id"))
        .set("user-api-key", &t.cred("user_api_key"))
        .set("content-type", "application/json");
    let result = if chunked {
        req.send(std::io::Cursor::new(body.to_vec()))
    } else {
        req.send_bytes(body)
    };
    let resp = match result {
        Ok(r) | Err(ureq::Error::Status(_, r)) => r,
        Err(e) => panic!("{method} {path}: transport error {e}"),
    };
    let status = resp.status();
    let headers = resp
        .headers_names()
        .into_iter()
        .filter_map(|n| resp.header(&n).map(|v| (n.clone(), v.to_string())))
        .collect();
    let text = resp.into_string().unwrap_or_default();
    let body = serde_json::from_str(&text).unwrap_or(Value::Null);
    Resp {
        status,
        body,
        text,
        headers,
    }
}

/// 1 MiB is accepted, one byte more is 413, however the body is framed.
fn body_limit_is_exactly_1_mib(app: &TestApp) {
    let t = app.bootstrap();
    let valid = json!({ "contact": { "location_id": t.location_id(), "last_name": "Padded" } }).to_string();
    // JSON may carry any amount of whitespace.
    let padded = |len: usize| format!("{valid}{}", " ".repeat(len - valid.len())).into_bytes();
    let exact = padded(1024 * 1024);
    let over = padded(OVER_LIMIT);
    for chunked in [false, true] {
        let r = send_bytes(&t, "POST", "/v2/contacts", &exact, chunked);
        assert_eq!(
            r.status,
            201,
            "exactly 1 MiB (chunked {chunked}): {}",
            short(&r.text)
        );
        let r = send_bytes(&t, "POST", "/v2/contacts", &over, chunked);
        check(&r, &Want::TooLarge, &format!("1 MiB + 1 (chunked {chunked})"));
    }
    let total = t.get("/v2/contacts").expect(200).body["meta"]["pagination"]["totalCount"].clone();
    assert_eq!(total, 2);
    // Bytes that are not UTF-8 are malformed JSON.
    for bytes in [
        &b"{\"contact\":{\"last_name\":\"\xff\xfe\"}}"[..],
        &b"{\"contact\":{\"last_name\":\"a\xc0\xafb\"}}"[..],
        &b"\xef\xbb\xbf\xff"[..],
    ] {
        let r = send_bytes(&t, "POST", "/v2/contacts", bytes, false);
        check(&r, &Want::Malformed, &format!("{bytes:?}"));
    }
    assert_eq!(
        t.get("/v2/contacts").expect(200).body["meta"]["pagination"]["totalCount"],
        total
    );
}

/// A card number sent where a field, filter, sort or expand name goes
/// (a client that built its body wrong) is refused without coming back
/// in the error: its digits are masked but the last four.
fn numbers_sent_as_names_are_not_echoed(app: &TestApp) {
    let t = app.bootstrap();
    const PAN: &str = "4916065618219339";
    let mut body = json!({ "action": "sale", "payment_method": "cc", "transaction_amount": "1.00",
        "account_number": "4111111111111111", "exp_date": "1239" });
    body[PAN] = json!("1229");
    let answers = [
        t.post("/v2/transactions", json!({ "transaction": body })),
        t.get(&format!("/v2/contacts?{PAN}=1")),
        t.get(&format!("/v2/contacts?sort={PAN}")),
        t.get(&format!("/v2/contacts?expand={PAN}")),
        t.get(&format!("/v2/transactions?expand=card_{PAN}")),
    ];
    for r in answers {
        assert_eq!(r.status, 422, "{}", r.text);
        assert!(
            !r.text.contains(PAN) && !r.text.contains("491606561821"),
            "{}",
            r.text
        );
        assert!(r.text.contains("XXXXXXXXXXXX9339"), "{}", r.text);
    }
}
