//! The spec's general conventions, on contacts and on a second resource:
//! envelopes, pagination meta and links, default and requested sorts,
//! filters (substrings, lists, ranges, ids and `_ts` keywords in the
//! location's time zone) and expands. Also the operational endpoints, and
//! a graceful shutdown that keeps what was written.

use crate::engine_tests;
use crate::support::{Engine, Resp, Tenant, TestApp};
use chrono::TimeZone;
use serde_json::{json, Value};
use std::collections::BTreeSet;

engine_tests!(
    envelopes_are_singular_and_plural,
    contact_pagination_meta_and_links,
    note_pagination_meta_and_links,
    default_and_requested_sorts,
    location_sorts,
    filters_match_substrings_lists_ranges_and_ids,
    location_filters,
    ts_keywords_select_fresh_records,
    ts_keywords_in_the_location_time_zone,
    expands_embed_under_their_names,
    operational_endpoints,
);

fn enc(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

fn id_of(v: &Value) -> String {
    v["id"].as_str().expect("an id").to_string()
}

/// The ids of a list answer, in order.
fn ids(r: &Resp, plural: &str) -> Vec<String> {
    r.body[plural]
        .as_array()
        .unwrap_or_else(|| panic!("no {plural} array: {}", r.text))
        .iter()
        .map(id_of)
        .collect()
}

fn pagination(r: &Resp) -> &Value {
    &r.body["meta"]["pagination"]
}

/// The query pairs of a link.
fn link_query(href: &str) -> Vec<(String, String)> {
    let query = href.split_once('?').map(|(_, q)| q).unwrap_or("");
    form_urlencoded::parse(query.as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

fn param(href: &str, name: &str) -> Option<String> {
    link_query(href)
        .into_iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v)
}

/// Follows an absolute link of this server.
fn follow(app: &TestApp, t: &Tenant, href: &Value) -> Resp {
    let href = href.as_str().unwrap_or_else(|| panic!("no link: {href}"));
    let path = href
        .strip_prefix(app.base.as_str())
        .unwrap_or_else(|| panic!("{href} is not absolute from {}", app.base));
    t.get(path).expect(200)
}

fn envelopes_are_singular_and_plural(app: &TestApp) {
    let t = app.bootstrap();
    let loc = t.location_id();
    let created = t
        .post(
            "/v2/contacts",
            json!({ "contact": { "location_id": loc, "last_name": "Doe" } }),
        )
        .expect(201);
    assert_eq!(keys(&created.body), set(&["contact"]), "{}", created.text);
    let c = &created.body["contact"];
    let id = id_of(c);
    assert!((24..=36).contains(&id.len()));
    assert_eq!(c["first_name"], Value::Null, "absent values are null");
    assert_eq!(c["created_ts"].as_i64().unwrap().to_string().len(), 10);
    assert_eq!(
        c["_links"]["self"]["href"],
        format!("{}/v2/contacts/{id}", app.base)
    );
    let one = t.get(&format!("/v2/contacts/{id}")).expect(200);
    assert_eq!(keys(&one.body), set(&["contact"]));
    let put = t
        .put(
            &format!("/v2/contacts/{id}"),
            json!({ "contact": { "city": "Oslo" } }),
        )
        .expect(200);
    assert_eq!(keys(&put.body), set(&["contact"]));
    let list = t.get("/v2/contacts").expect(200);
    assert_eq!(keys(&list.body), set(&["contacts", "meta"]), "{}", list.text);
    assert!(list.body["contacts"].is_array());
    assert_eq!(list.body["contacts"][0], put.body["contact"]);
    assert!(keys(&list.body["meta"]).contains("pagination"));
    assert!(keys(&list.body["meta"]).contains("sort"));

    // Another resource: locations and notes follow the same shape.
    let one = t.get(&format!("/v2/locations/{loc}")).expect(200);
    assert_eq!(keys(&one.body), set(&["location"]));
    assert_eq!(
        one.body["location"]["_links"]["self"]["href"],
        format!("{}/v2/locations/{loc}", app.base)
    );
    let list = t.get("/v2/locations").expect(200);
    assert_eq!(keys(&list.body), set(&["locations", "meta"]));
    assert_eq!(list.body["locations"][0], one.body["location"]);
    let note = t
        .post(
            "/v2/notes",
            json!({ "note": { "resource": "Contact", "resource_id": id, "note": "n" } }),
        )
        .expect(201);
    assert_eq!(keys(&note.body), set(&["note"]));
    let list = t.get("/v2/notes").expect(200);
    assert_eq!(keys(&list.body), set(&["notes", "meta"]));
    assert_eq!(list.body["notes"][0], note.body["note"]);
}

/// Creates `n` contacts; returns their ids in creation order.
fn contacts(t: &Tenant, n: usize, last_name: &str) -> Vec<String> {
    (0..n)
        .map(|i| id_of(&t.contact(json!({ "last_name": last_name, "first_name": format!("n{i:03}") }))))
        .collect()
}

fn contact_pagination_meta_and_links(app: &TestApp) {
    let t = app.bootstrap();
    // A fresh tenant's empty list.
    let empty = t.get("/v2/contacts").expect(200);
    assert_eq!(empty.body["contacts"], json!([]));
    let p = pagination(&empty);
    assert_eq!(p["totalCount"], 0);
    assert_eq!(p["pageCount"], 0);
    assert_eq!(p["currentPage"], 0);
    assert_eq!(p["perPage"], 20);
    assert!(p["links"]["self"]["href"].is_string());
    assert!(p["links"].get("next").is_none() && p["links"].get("last").is_none());

    let created: BTreeSet<String> = contacts(&t, 45, "Doe").into_iter().collect();

    // Default page size 20, zero-based currentPage, links from the base.
    let first = t.get("/v2/contacts").expect(200);
    let p = pagination(&first).clone();
    assert_eq!(first.body["contacts"].as_array().unwrap().len(), 20);
    assert_eq!(p["totalCount"], 45);
    assert_eq!(p["pageCount"], 3);
    assert_eq!(p["currentPage"], 0);
    assert_eq!(p["perPage"], 20);
    let self_href = p["links"]["self"]["href"].as_str().unwrap();
    assert!(
        self_href.starts_with(&format!("{}/v2/contacts", app.base)),
        "absolute self link: {self_href}"
    );
    assert_eq!(param(self_href, "page").as_deref(), Some("1"));
    assert_eq!(
        param(p["links"]["next"]["href"].as_str().unwrap(), "page").as_deref(),
        Some("2")
    );
    assert_eq!(
        param(p["links"]["last"]["href"].as_str().unwrap(), "page").as_deref(),
        Some("3")
    );
    // page=1 is the same page.
    assert_eq!(
        ids(&t.get("/v2/contacts?page=1").expect(200), "contacts"),
        ids(&first, "contacts")
    );

    let second = follow(app, &t, &p["links"]["next"]["href"]);
    let p2 = pagination(&second).clone();
    assert_eq!(p2["currentPage"], 1, "page=2 is currentPage 1");
    assert_eq!(p2["totalCount"], 45);
    assert_eq!(second.body["contacts"].as_array().unwrap().len(), 20);
    assert_eq!(
        param(p2["links"]["self"]["href"].as_str().unwrap(), "page").as_deref(),
        Some("2")
    );
    let third = follow(app, &t, &p2["links"]["next"]["href"]);
    let p3 = pagination(&third).clone();
    assert_eq!(p3["currentPage"], 2);
    assert_eq!(third.body["contacts"].as_array().unwrap().len(), 5);
    assert!(
        p3["links"].get("next").is_none() && p3["links"].get("last").is_none(),
        "no next or last on the last page: {}",
        third.text
    );
    assert_eq!(
        follow(app, &t, &p["links"]["last"]["href"]).body["contacts"],
        third.body["contacts"]
    );
    let mut seen = BTreeSet::new();
    for page in [&first, &second, &third] {
        for id in ids(page, "contacts") {
            assert!(seen.insert(id), "no record on two pages");
        }
    }
    assert_eq!(seen, created, "the pages hold every record once");

    // Maximum page size 100.
    let all = t.get("/v2/contacts?page_size=100").expect(200);
    assert_eq!(all.body["contacts"].as_array().unwrap().len(), 45);
    assert_eq!(pagination(&all)["perPage"], 100);
    assert_eq!(pagination(&all)["pageCount"], 1);
    assert!(pagination(&all)["links"].get("next").is_none());
    t.get("/v2/contacts?page_size=101").expect(422);

    // Links keep the page size, filters and sort.
    let sized = t
        .get("/v2/contacts?page_size=7&last_name=doe&sort=-first_name")
        .expect(200);
    let p = pagination(&sized).clone();
    assert_eq!(p["pageCount"], 7);
    assert_eq!(p["perPage"], 7);
    let next = p["links"]["next"]["href"].as_str().unwrap();
    assert_eq!(param(next, "page_size").as_deref(), Some("7"));
    assert_eq!(param(next, "last_name").as_deref(), Some("doe"));
    assert_eq!(param(next, "sort").as_deref(), Some("-first_name"));
    assert_eq!(param(next, "page").as_deref(), Some("2"));
    assert_eq!(
        param(p["links"]["last"]["href"].as_str().unwrap(), "page").as_deref(),
        Some("7")
    );
    let last = follow(app, &t, &p["links"]["last"]["href"]);
    assert_eq!(last.body["contacts"].as_array().unwrap().len(), 3);
    assert_eq!(pagination(&last)["currentPage"], 6);
    assert_eq!(last.body["contacts"][2]["first_name"], "n000");

    // Beyond the end: an empty page with the right totals.
    for page in [4, 1000] {
        let r = t.get(&format!("/v2/contacts?page={page}")).expect(200);
        assert_eq!(r.body["contacts"], json!([]));
        let p = pagination(&r);
        assert_eq!(p["totalCount"], 45);
        assert_eq!(p["pageCount"], 3);
        assert_eq!(p["currentPage"], page - 1);
        assert!(p["links"].get("next").is_none(), "{}", r.text);
    }

    // Credentials sent in the query string never appear in links.
    let key = t.cred("user_api_key");
    let path = format!(
        "/v2/contacts?page_size=2&developer-id={}&user-id={}&user-api-key={}",
        t.cred("developer_id"),
        t.user_id(),
        key
    );
    let r = app.client().send("GET", &path, &[], None).expect(200);
    let links = pagination(&r)["links"].to_string();
    assert!(
        !links.contains(&key) && !links.contains("user-api-key"),
        "{links}"
    );
    assert_eq!(
        param(
            pagination(&r)["links"]["next"]["href"].as_str().unwrap(),
            "page_size"
        )
        .as_deref(),
        Some("2")
    );
}

fn note_pagination_meta_and_links(app: &TestApp) {
    let t = app.bootstrap();
    let cid = id_of(&t.contact(json!({})));
    let mut created = BTreeSet::new();
    for i in 0..25 {
        let n = t
            .post(
                "/v2/notes",
                json!({ "note": { "resource": "Contact", "resource_id": cid, "note": format!("note {i}") } }),
            )
            .expect(201);
        created.insert(id_of(&n.body["note"]));
    }
    let first = t.get("/v2/notes").expect(200);
    let p = pagination(&first).clone();
    assert_eq!(first.body["notes"].as_array().unwrap().len(), 20);
    assert_eq!(p["totalCount"], 25);
    assert_eq!(p["pageCount"], 2);
    assert_eq!(p["currentPage"], 0);
    assert_eq!(p["perPage"], 20);
    assert!(p["links"]["self"]["href"]
        .as_str()
        .unwrap()
        .starts_with(&format!("{}/v2/notes", app.base)));
    assert_eq!(
        first.body["meta"]["sort"]["attributes"],
        json!({ "id": "desc" }),
        "notes sort by id desc by default"
    );
    let second = follow(app, &t, &p["links"]["next"]["href"]);
    assert_eq!(pagination(&second)["currentPage"], 1);
    assert_eq!(second.body["notes"].as_array().unwrap().len(), 5);
    assert!(pagination(&second)["links"].get("next").is_none());
    let mut all: Vec<String> = ids(&first, "notes");
    all.extend(ids(&second, "notes"));
    let mut sorted = all.clone();
    sorted.sort();
    sorted.reverse();
    assert_eq!(all, sorted, "id desc across pages");
    assert_eq!(all.into_iter().collect::<BTreeSet<_>>(), created);
    let beyond = t.get("/v2/notes?page=3").expect(200);
    assert_eq!(beyond.body["notes"], json!([]));
    assert_eq!(pagination(&beyond)["totalCount"], 25);
    assert_eq!(pagination(&beyond)["currentPage"], 2);
    t.get("/v2/notes?page_size=101").expect(422);
    assert_eq!(
        t.get("/v2/notes?page_size=100").expect(200).body["notes"]
            .as_array()
            .unwrap()
            .len(),
        25
    );
}

fn default_and_requested_sorts(app: &TestApp) {
    let t = app.bootstrap();
    let older = id_of(&t.contact(json!({ "last_name": "Delta" })));
    // created_ts counts seconds: the next ones are a second newer.
    t.post(
        "/v2/developer/testclock/advance",
        json!({ "testclock": { "seconds": 1 } }),
    )
    .expect(200);
    let mut newer = BTreeSet::new();
    for name in ["Alpha", "Echo", "Charlie", "Bravo"] {
        newer.insert(id_of(&t.contact(json!({ "last_name": name }))));
    }

    let r = t.get("/v2/contacts").expect(200);
    assert_eq!(
        r.body["meta"]["sort"]["attributes"],
        json!({ "created_ts": "desc" }),
        "contacts sort by created_ts desc by default"
    );
    let order = ids(&r, "contacts");
    assert_eq!(order.last(), Some(&older), "the oldest comes last: {}", r.text);
    assert_eq!(order[..4].iter().cloned().collect::<BTreeSet<_>>(), newer);
    let ts: Vec<i64> = r.body["contacts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["created_ts"].as_i64().unwrap())
        .collect();
    assert!(ts.windows(2).all(|w| w[0] >= w[1]), "{ts:?}");

    let names = |r: &Resp| -> Vec<String> {
        r.body["contacts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["last_name"].as_str().unwrap().to_string())
            .collect()
    };
    let asc = t.get("/v2/contacts?sort=last_name").expect(200);
    assert_eq!(names(&asc), ["Alpha", "Bravo", "Charlie", "Delta", "Echo"]);
    assert_eq!(
        asc.body["meta"]["sort"]["attributes"],
        json!({ "last_name": "asc" })
    );
    let desc = t.get("/v2/contacts?sort=-last_name").expect(200);
    assert_eq!(names(&desc), ["Echo", "Delta", "Charlie", "Bravo", "Alpha"]);
    assert_eq!(
        desc.body["meta"]["sort"]["attributes"],
        json!({ "last_name": "desc" })
    );
    let by_ts = t.get("/v2/contacts?sort=created_ts").expect(200);
    assert_eq!(ids(&by_ts, "contacts")[0], older, "the oldest comes first");
    assert_eq!(
        by_ts.body["meta"]["sort"]["attributes"],
        json!({ "created_ts": "asc" })
    );
    let by_id = ids(&t.get("/v2/contacts?sort=id").expect(200), "contacts");
    let mut sorted = by_id.clone();
    sorted.sort();
    assert_eq!(by_id, sorted);
    let by_id_desc = ids(&t.get("/v2/contacts?sort=-id").expect(200), "contacts");
    sorted.reverse();
    assert_eq!(by_id_desc, sorted);
    // A sort holds across pages.
    let mut paged = Vec::new();
    for page in 1..=3 {
        let r = t
            .get(&format!("/v2/contacts?sort=last_name&page_size=2&page={page}"))
            .expect(200);
        assert_eq!(
            param(pagination(&r)["links"]["self"]["href"].as_str().unwrap(), "sort").as_deref(),
            Some("last_name")
        );
        paged.extend(names(&r));
    }
    assert_eq!(paged, ["Alpha", "Bravo", "Charlie", "Delta", "Echo"]);
}

fn location_sorts(app: &TestApp) {
    let t = app.bootstrap();
    let loc = t.location_id();
    let mut children = Vec::new();
    for name in ["Charlie", "Alpha", "Bravo"] {
        children.push(t.location(&loc, name));
    }
    let r = t.get("/v2/locations").expect(200);
    assert_eq!(
        r.body["meta"]["sort"]["attributes"],
        json!({ "id": "desc" }),
        "locations sort by id desc by default"
    );
    let order = ids(&r, "locations");
    let mut sorted = order.clone();
    sorted.sort();
    sorted.reverse();
    assert_eq!(order, sorted);
    assert_eq!(order.len(), 4);
    let names = |r: &Resp| -> Vec<String> {
        r.body["locations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["name"].as_str().unwrap().to_string())
            .collect()
    };
    let asc = t
        .get(&format!("/v2/locations?sort=name&parent_id={loc}"))
        .expect(200);
    assert_eq!(names(&asc), ["Alpha", "Bravo", "Charlie"]);
    assert_eq!(asc.body["meta"]["sort"]["attributes"], json!({ "name": "asc" }));
    let desc = t
        .get(&format!("/v2/locations?sort=-name&parent_id={loc}"))
        .expect(200);
    assert_eq!(names(&desc), ["Charlie", "Bravo", "Alpha"]);
    assert_eq!(desc.body["meta"]["sort"]["attributes"], json!({ "name": "desc" }));
}

/// The ids a contacts filter finds.
fn found(t: &Tenant, query: &str) -> BTreeSet<String> {
    let r = t.get(&format!("/v2/contacts?page_size=100&{query}"));
    assert_eq!(r.status, 200, "?{query}: {}", r.text);
    ids(&r, "contacts").into_iter().collect()
}

fn filters_match_substrings_lists_ranges_and_ids(app: &TestApp) {
    let t = app.bootstrap();
    let mk = |fields: Value| id_of(&t.contact(fields));
    let c1 = mk(
        json!({ "last_name": "McAllister", "first_name": "Ann", "city": "Oslo", "header_message_type": 0, "email_trx_receipt": 1 }),
    );
    let c2 = mk(
        json!({ "last_name": "Allison", "first_name": "Bob", "city": "Bergen", "header_message_type": 1 }),
    );
    let c3 = mk(
        json!({ "last_name": "Łukasiewicz", "first_name": "Émile", "city": "Ålesund", "header_message_type": 2 }),
    );
    let c4 =
        mk(json!({ "last_name": "Smith", "first_name": "carl", "city": "OSLO", "header_message_type": 3 }));
    let c5 = mk(json!({ "last_name": "Doe", "header_message_type": 4, "email_trx_receipt": 0 }));
    let of = |v: &[&String]| -> BTreeSet<String> { v.iter().map(|s| s.to_string()).collect() };
    let everyone = of(&[&c1, &c2, &c3, &c4, &c5]);
    assert_eq!(found(&t, ""), everyone);

    let mut failures = Vec::new();
    let mut expect = |query: &str, want: BTreeSet<String>| {
        let got = found(&t, query);
        if got != want {
            failures.push(format!("?{query}: want {want:?}, got {got:?}"));
        }
    };
    // Text: case-insensitive substrings.
    expect("last_name=alli", of(&[&c1, &c2]));
    expect("last_name=ALLI", of(&[&c1, &c2]));
    expect("last_name=aLlIsOn", of(&[&c2]));
    expect("last_name=ister", of(&[&c1]));
    expect("city=oslo", of(&[&c1, &c4]));
    expect("first_name=CARL", of(&[&c4]));
    expect("last_name=zz", of(&[]));
    // Outside ASCII too.
    expect(&format!("last_name={}", enc("Łukasiewicz")), of(&[&c3]));
    expect(&format!("last_name={}", enc("łukasiewicz")), of(&[&c3]));
    expect(&format!("last_name={}", enc("ŁUKASIEWICZ")), of(&[&c3]));
    expect(&format!("city={}", enc("ålesund")), of(&[&c3]));
    expect(&format!("first_name={}", enc("émile")), of(&[&c3]));
    // Comma lists match any.
    expect("last_name=smith,doe", of(&[&c4, &c5]));
    expect("last_name=smi,zzz", of(&[&c4]));
    expect("city=bergen,oslo", of(&[&c1, &c2, &c4]));
    // Integer ranges are inclusive; either end may be open.
    expect("header_message_type=1%7C3", of(&[&c2, &c3, &c4]));
    expect("header_message_type=2%7C", of(&[&c3, &c4, &c5]));
    expect("header_message_type=%7C1", of(&[&c1, &c2]));
    expect("header_message_type=0,4", of(&[&c1, &c5]));
    expect("header_message_type=2", of(&[&c3]));
    expect("email_trx_receipt=1", of(&[&c1]));
    // Unsent, it follows the location's default (off here).
    expect("email_trx_receipt=0", of(&[&c2, &c3, &c4, &c5]));
    // Ids match exactly.
    expect(&format!("id={c1}"), of(&[&c1]));
    expect(&format!("id={c1},{c2}"), of(&[&c1, &c2]));
    expect(&format!("id={}", &c1[..20]), of(&[]));
    expect(&format!("id={}", &c1[4..]), of(&[]));
    expect(&format!("location_id={}", t.location_id()), everyone.clone());
    expect(&format!("location_id={}", &t.location_id()[..24]), of(&[]));
    // Filters combine with AND.
    expect("last_name=alli&city=oslo", of(&[&c1]));
    // Timestamps take ranges of epoch seconds.
    let ts: Vec<i64> = [&c1, &c5]
        .iter()
        .map(|id| {
            t.get(&format!("/v2/contacts/{id}")).body["contact"]["created_ts"]
                .as_i64()
                .unwrap()
        })
        .collect();
    let (lo, hi) = (ts[0].min(ts[1]), ts[0].max(ts[1]));
    expect(&format!("created_ts={lo}%7C{hi}"), everyone.clone());
    expect(&format!("created_ts={}%7C", hi + 1), of(&[]));
    expect(&format!("created_ts=%7C{}", lo - 1), of(&[]));
    assert!(failures.is_empty(), "filters:\n{}", failures.join("\n"));
}

fn location_filters(app: &TestApp) {
    let t = app.bootstrap();
    let loc = t.location_id();
    let north = t.location(&loc, "North Branch");
    let south = t.location(&loc, "South Branch");
    let depot = t.location(&north, "Depot");
    let found = |q: &str| -> BTreeSet<String> {
        ids(&t.get(&format!("/v2/locations?{q}")).expect(200), "locations")
            .into_iter()
            .collect()
    };
    let of = |v: &[&String]| -> BTreeSet<String> { v.iter().map(|s| s.to_string()).collect() };
    assert_eq!(found("name=branch"), of(&[&north, &south]));
    assert_eq!(found("name=NORTH"), of(&[&north]));
    assert_eq!(found("name=depot,south"), of(&[&south, &depot]));
    assert_eq!(found(&format!("parent_id={loc}")), of(&[&north, &south]));
    assert_eq!(found(&format!("parent_id={north}")), of(&[&depot]));
    assert_eq!(found(&format!("id={depot}")), of(&[&depot]));
    assert_eq!(found(&format!("id={}", &depot[..30])), of(&[]));
}

/// Moves the tenant's test clock past midnight, if needed, so the local
/// day in `tz` has at least a minute left and "today" cannot roll over
/// between a write and its reads.
fn away_from_midnight(t: &Tenant, tz: chrono_tz::Tz) {
    use chrono::{TimeZone, Timelike};
    let clock = t.get("/v2/developer/testclock").expect(200).body["testclock"].clone();
    let now = chrono::Utc
        .timestamp_opt(clock["now"].as_i64().expect("now"), 0)
        .unwrap()
        .with_timezone(&tz);
    let left = 86_400 - i64::from(now.num_seconds_from_midnight());
    if left < 60 {
        t.post(
            "/v2/developer/testclock/advance",
            json!({ "testclock": { "seconds": left + 2 } }),
        )
        .expect(200);
    }
}

/// Checks the `_ts` keywords against a record created just now.
fn check_ts_keywords(t: &Tenant, id: &str, ts: i64) {
    let mut failures = Vec::new();
    let mut expect = |query: String, included: bool| {
        let got = found(t, &query).contains(id);
        if got != included {
            failures.push(format!(
                "?{query}: the record (created_ts {ts}) should {}be included",
                if included { "" } else { "not " }
            ));
        }
    };
    for field in ["created_ts", "modified_ts"] {
        for kw in ["today", "this week", "this month", "last 30 days", "last 90 days"] {
            expect(format!("{field}={}", enc(kw)), true);
        }
        for kw in ["yesterday", "last week", "last month"] {
            expect(format!("{field}={}", enc(kw)), false);
        }
    }
    let custom = |from: Option<i64>, to: Option<i64>| {
        let mut q = "created_ts=custom".to_string();
        if let Some(f) = from {
            q.push_str(&format!("&created_ts_from={f}"));
        }
        if let Some(t) = to {
            q.push_str(&format!("&created_ts_to={t}"));
        }
        q
    };
    expect(custom(Some(ts), Some(ts)), true);
    expect(custom(Some(ts - 60), Some(ts + 60)), true);
    expect(custom(Some(ts + 1), Some(ts + 3600)), false);
    expect(custom(Some(ts - 3600), Some(ts - 1)), false);
    expect(custom(Some(ts), None), true);
    expect(custom(Some(ts + 1), None), false);
    expect(custom(None, Some(ts)), true);
    expect(custom(None, Some(ts - 1)), false);
    assert!(failures.is_empty(), "_ts keywords:\n{}", failures.join("\n"));
}

fn ts_keywords_select_fresh_records(app: &TestApp) {
    let t = app.bootstrap();
    away_from_midnight(&t, chrono_tz::UTC);
    let c = t.contact(json!({}));
    let ts = c["created_ts"].as_i64().unwrap();
    check_ts_keywords(&t, &id_of(&c), ts);
}

fn ts_keywords_in_the_location_time_zone(app: &TestApp) {
    let t = app.bootstrap();
    let loc = t.location_id();
    let own = t.get(&format!("/v2/locations/{loc}")).expect(200).body["location"].clone();
    let put = t
        .put(
            &format!("/v2/locations/{loc}"),
            json!({ "location": { "parent_id": own["parent_id"], "name": own["name"], "tz": "Pacific/Kiritimati" } }),
        )
        .expect(200);
    assert_eq!(put.body["location"]["tz"], "Pacific/Kiritimati");
    assert_eq!(
        t.get(&format!("/v2/locations/{loc}")).body["location"]["tz"],
        "Pacific/Kiritimati"
    );
    let tz: chrono_tz::Tz = "Pacific/Kiritimati".parse().unwrap();
    away_from_midnight(&t, tz);
    let c = t.contact(json!({}));
    let ts = c["created_ts"].as_i64().unwrap();
    check_ts_keywords(&t, &id_of(&c), ts);
    // "today" is the local day of Kiritimati (UTC+14): its records are
    // exactly those inside that day's bounds.
    let day = chrono::Utc
        .timestamp_opt(ts, 0)
        .single()
        .unwrap()
        .with_timezone(&tz)
        .date_naive();
    let start = tz
        .from_local_datetime(&day.and_hms_opt(0, 0, 0).unwrap())
        .single()
        .unwrap()
        .timestamp();
    assert!(start <= ts && ts < start + 86_400);
    let today = found(&t, "created_ts=today");
    let custom = found(
        &t,
        &format!(
            "created_ts=custom&created_ts_from={start}&created_ts_to={}",
            start + 86_399
        ),
    );
    assert_eq!(today, custom, "today is the location's local day");
}

fn expands_embed_under_their_names(app: &TestApp) {
    let t = app.bootstrap();
    let loc = t.location_id();
    let c = t.contact(json!({}));
    let cid = id_of(&c);
    let note = t
        .post(
            "/v2/notes",
            json!({ "note": { "resource": "Contact", "resource_id": cid, "note": "VIP" } }),
        )
        .expect(201)
        .body["note"]
        .clone();
    let me = t.get(&format!("/v2/users/{}", t.user_id())).expect(200).body["user"].clone();
    let location = t.get(&format!("/v2/locations/{loc}")).expect(200).body["location"].clone();

    let r = t
        .get(&format!("/v2/contacts/{cid}?expand=created_user,location,notes"))
        .expect(200);
    let got = &r.body["contact"];
    assert_eq!(got["created_user"], me, "created_user is the user record");
    assert_eq!(got["location"], location, "location is the location record");
    assert_eq!(got["notes"], json!([note]));
    let plain = t.get(&format!("/v2/contacts/{cid}")).expect(200);
    for k in ["created_user", "location", "notes"] {
        assert!(plain.body["contact"].get(k).is_none(), "{k} only when asked");
    }
    let list = t.get("/v2/contacts?expand=created_user,location").expect(200);
    for rec in list.body["contacts"].as_array().unwrap() {
        assert_eq!(rec["created_user"], me);
        assert_eq!(rec["location"], location);
        assert!(rec.get("notes").is_none());
    }

    // Notes and locations embed the same way.
    let nid = id_of(&note);
    let r = t.get(&format!("/v2/notes/{nid}?expand=created_user")).expect(200);
    assert_eq!(r.body["note"]["created_user"], me);
    let child = t.location(&loc, "Branch");
    let r = t
        .get(&format!("/v2/locations/{child}?expand=parent,created_user"))
        .expect(200);
    assert_eq!(r.body["location"]["parent"], location);
    assert_eq!(r.body["location"]["created_user"], me);
    let r = t.get("/v2/locations?expand=parent").expect(200);
    for rec in r.body["locations"].as_array().unwrap() {
        assert!(rec.get("parent").is_some(), "every record carries the expand");
    }
}

fn operational_endpoints(app: &TestApp) {
    let t = app.bootstrap();
    let c = app.client();
    assert_eq!(c.send("GET", "/healthz", &[], None).status, 200);
    assert_eq!(c.send("GET", "/readyz", &[], None).status, 200);

    let cid = id_of(&t.contact(json!({})));
    t.get(&format!("/v2/contacts/{cid}")).expect(200);
    t.get("/v2/contacts/0190a0b0c0d0e0f0a0b0c0d0e0f0a0b0").expect(404);
    let m = c.send("GET", "/metrics", &[], None);
    assert_eq!(m.status, 200);
    assert!(
        m.header("content-type").unwrap_or("").starts_with("text/plain"),
        "{:?}",
        m.header("content-type")
    );
    assert!(m.text.contains("ferrogate_http_requests_total"));
    assert!(
        m.text.contains("route=\"/v2/contacts/{id}\""),
        "the route template is a label: {}",
        m.text
    );
    assert!(!m.text.contains(&cid), "raw ids never become labels");
    for line in m.text.lines().filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("{line}"));
        assert!(value.parse::<f64>().is_ok(), "a number ends {line}");
        assert!(
            series.starts_with("ferrogate_") || series.starts_with("process_"),
            "{line}"
        );
    }

    let o = c.send("GET", "/v2/openapi.json", &[], None);
    assert_eq!(o.status, 200);
    let doc = &o.body;
    assert!(
        doc["openapi"].as_str().unwrap_or("").starts_with("3."),
        "{}",
        doc["openapi"]
    );
    for (path, verbs) in [
        ("/v2/contacts", &["get", "post"][..]),
        ("/v2/contacts/{id}", &["get", "put", "delete"][..]),
    ] {
        for v in verbs {
            assert!(doc["paths"][path][v].is_object(), "{v} {path} is described");
        }
    }
    let schemas = doc["components"]["schemas"].as_object().expect("schemas");
    let contact = schemas
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("contact"))
        .map(|(_, v)| v)
        .expect("a contact schema");
    assert!(contact["properties"]["last_name"].is_object());

    let d = c.send("GET", "/docs", &[], None);
    assert_eq!(d.status, 200);
    assert!(d.header("content-type").unwrap_or("").starts_with("text/html"));
    assert!(d.text.contains("/v2/openapi.json"));
    let lower = d.text.to_lowercase();
    for external in ["http://", "https://", "=\"//", "='//", "url(//", "@import"] {
        assert!(
            !lower.contains(external),
            "the docs page loads nothing from outside ({external})"
        );
    }
}

/// Not an `engine_tests!` entry: it needs the app mutably to stop it.
mod graceful_shutdown_keeps_writes {
    use super::*;

    #[test]
    fn sqlite() {
        run(Engine::Sqlite);
    }

    #[test]
    fn postgres() {
        run(Engine::Postgres);
    }

    fn run(engine: Engine) {
        let Some(mut app) = TestApp::start(engine) else {
            crate::support::no_postgres();
            return;
        };
        let t = app.bootstrap();
        let c = t.contact(json!({ "first_name": "Kept" }));
        let id = id_of(&c);
        let updated = t
            .put(
                &format!("/v2/contacts/{id}"),
                json!({ "contact": { "city": "Written just before" } }),
            )
            .expect(200)
            .body["contact"]
            .clone();
        let status = app.stop();
        assert!(
            status.success(),
            "{:?}: exit status {status:?}; log: {}",
            app.engine,
            app.log()
        );
        assert_eq!(status.code(), Some(0));
        app.spawn();
        let t = Tenant {
            base: app.base.clone(),
            creds: t.creds.clone(),
        };
        let read = t.get(&format!("/v2/contacts/{id}")).expect(200);
        let mut want = updated;
        want["_links"] = read.body["contact"]["_links"].clone();
        assert_eq!(read.body["contact"], want);
        // And the restarted server stops cleanly too.
        let status = app.stop();
        assert_eq!(status.code(), Some(0), "log: {}", app.log());
    }
}
