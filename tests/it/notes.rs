//! Notes end to end: what a note can be attached to, its length limit,
//! what an update may change, reads, filters, links, deletes (with the
//! record it annotates), scope, expands and change logs.

use crate::engine_tests;
use crate::support::{error_fields, fields, str_of, Resp, Tenant, TestApp};
use serde_json::{json, Value};
use std::collections::BTreeSet;

engine_tests!(
    note_create_requires_a_valid_resource,
    note_resource_names_are_normalised,
    note_length_limit,
    note_update_changes_text_and_visibility_only,
    note_lifecycle_links_and_filters,
    notes_die_with_their_contact,
    notes_do_not_outlive_their_user,
    notes_are_scoped,
    note_expands_and_changelogs,
);

fn ids(r: &Resp) -> BTreeSet<String> {
    r.body["notes"]
        .as_array()
        .unwrap_or_else(|| panic!("no notes list: {}", r.text))
        .iter()
        .map(|n| str_of(&n["id"]))
        .collect()
}

fn note(t: &Tenant, resource: &str, resource_id: &str, text: &str) -> Value {
    t.post(
        "/v2/notes",
        json!({ "note": { "resource": resource, "resource_id": resource_id, "note": text } }),
    )
    .expect(201)
    .body["note"]
        .clone()
}

fn note_create_requires_a_valid_resource(app: &TestApp) {
    let t = app.bootstrap();
    let other = app.bootstrap();
    let contact = str_of(&t.contact(json!({}))["id"]);
    let foreign = str_of(&other.contact(json!({}))["id"]);
    let post = |body: Value| t.post("/v2/notes", json!({ "note": body }));

    let r = post(json!({ "note": "orphan" })).expect(422);
    assert_eq!(
        error_fields(&r),
        fields(&["resource", "resource_id"]),
        "{}",
        r.text
    );
    let r = post(json!({ "resource_id": contact })).expect(422);
    assert_eq!(error_fields(&r), fields(&["resource"]), "{}", r.text);
    let r = post(json!({ "resource": "Contact" })).expect(422);
    assert_eq!(error_fields(&r), fields(&["resource_id"]), "{}", r.text);
    let r = post(json!({ "resource": "", "resource_id": contact })).expect(422);
    assert_eq!(error_fields(&r), fields(&["resource"]), "{}", r.text);
    let r = post(json!({ "resource": "Contact", "resource_id": "" })).expect(422);
    assert_eq!(error_fields(&r), fields(&["resource_id"]), "{}", r.text);

    for bad in ["Transaction", "Contacts", "Note", "Contact; DROP TABLE notes"] {
        let r = post(json!({ "resource": bad, "resource_id": contact })).expect(422);
        assert_eq!(
            error_fields(&r),
            fields(&["resource"]),
            "resource={bad}: {}",
            r.text
        );
    }
    for (resource, bad) in [
        ("Contact", "nope".to_string()),
        ("Contact", uuid::Uuid::new_v4().simple().to_string()),
        ("Contact", foreign.clone()),
        ("Contact", other.location_id()),
        // The id names a record, but not one of this kind.
        ("Contact", t.location_id()),
        ("Location", contact.clone()),
        ("User", contact.clone()),
        ("Location", other.location_id()),
        ("User", other.user_id()),
    ] {
        let r = post(json!({ "resource": resource, "resource_id": bad })).expect(422);
        assert_eq!(
            error_fields(&r),
            fields(&["resource_id"]),
            "{resource} {bad}: {}",
            r.text
        );
    }
    let r = post(json!({ "resource": "Contact", "resource_id": contact, "id": contact })).expect(422);
    assert!(!r.errors("id").is_empty(), "{}", r.text);
    let r = post(json!({ "resource": "Contact", "resource_id": contact, "created_ts": 5 })).expect(422);
    assert!(!r.errors("created_ts").is_empty(), "{}", r.text);
    assert_eq!(
        t.get("/v2/notes").expect(200).body["meta"]["pagination"]["totalCount"],
        0,
        "nothing was created"
    );
    // The note text itself is optional.
    let r = t
        .post(
            "/v2/notes",
            json!({ "note": { "resource": "Contact", "resource_id": contact } }),
        )
        .expect(201);
    assert_eq!(r.body["note"]["note"], Value::Null);
}

fn note_resource_names_are_normalised(app: &TestApp) {
    let t = app.bootstrap();
    let contact = str_of(&t.contact(json!({}))["id"]);
    let loc = t.location_id();
    let user = t.user_id();
    for (sent, stored, id, path) in [
        ("contact", "Contact", &contact, "contacts"),
        ("CONTACT", "Contact", &contact, "contacts"),
        ("Contact", "Contact", &contact, "contacts"),
        ("location", "Location", &loc, "locations"),
        ("LoCaTiOn", "Location", &loc, "locations"),
        ("user", "User", &user, "users"),
        ("USER", "User", &user, "users"),
    ] {
        let n = note(&t, sent, id, sent);
        assert_eq!(n["resource"], stored, "{sent} is stored as {stored}");
        assert_eq!(n["resource_id"], *id);
        assert_eq!(
            n["_links"]["for"]["href"],
            format!("{}/v2/{path}/{id}", app.base),
            "{sent}"
        );
        let read = t.get(&format!("/v2/notes/{}", str_of(&n["id"]))).expect(200);
        assert_eq!(read.body["note"]["resource"], stored);
    }
    let count = |q: &str| {
        t.get(&format!("/v2/notes{q}")).expect(200).body["meta"]["pagination"]["totalCount"].clone()
    };
    assert_eq!(count("?resource=Contact"), 3);
    assert_eq!(count("?resource=Location"), 2);
    assert_eq!(count("?resource=User"), 2);
    assert_eq!(count(""), 7);
}

fn note_length_limit(app: &TestApp) {
    let t = app.bootstrap();
    let contact = str_of(&t.contact(json!({}))["id"]);
    // 16384 characters (not bytes): multi-byte text counts per character.
    let longest: String = "ä☃x".chars().cycle().take(16384).collect();
    let n = note(&t, "Contact", &contact, &longest);
    let id = str_of(&n["id"]);
    assert_eq!(n["note"], longest);
    assert_eq!(
        t.get(&format!("/v2/notes/{id}")).expect(200).body["note"]["note"],
        longest
    );
    let too_long: String = "x".repeat(16385);
    let r = t
        .post(
            "/v2/notes",
            json!({ "note": { "resource": "Contact", "resource_id": contact, "note": too_long } }),
        )
        .expect(422);
    assert_eq!(error_fields(&r), fields(&["note"]), "{}", r.text);
    let r = t
        .put(
            &format!("/v2/notes/{id}"),
            json!({ "note": { "note": too_long } }),
        )
        .expect(422);
    assert_eq!(error_fields(&r), fields(&["note"]), "{}", r.text);
    assert_eq!(
        t.get(&format!("/v2/notes/{id}")).expect(200).body["note"]["note"],
        longest,
        "a refused update changes nothing"
    );
    let exact: String = "y".repeat(16384);
    let r = t
        .put(&format!("/v2/notes/{id}"), json!({ "note": { "note": exact } }))
        .expect(200);
    assert_eq!(r.body["note"]["note"], exact);
}

fn note_update_changes_text_and_visibility_only(app: &TestApp) {
    let t = app.bootstrap();
    let contact = str_of(&t.contact(json!({}))["id"]);
    let other_contact = str_of(&t.contact(json!({ "last_name": "Other" }))["id"]);
    let n = note(&t, "Contact", &contact, "first");
    let id = str_of(&n["id"]);
    let path = format!("/v2/notes/{id}");
    let group = "0123456789abcdef0123456789abcdef";
    let r = t
        .put(
            &path,
            json!({ "note": { "note": "second", "visibility_group_id": group } }),
        )
        .expect(200);
    let u = &r.body["note"];
    assert_eq!(u["note"], "second");
    assert_eq!(u["visibility_group_id"], group);
    assert_eq!(u["resource"], "Contact");
    assert_eq!(u["resource_id"], contact);
    assert_eq!(u["id"], n["id"]);
    assert_eq!(u["created_ts"], n["created_ts"]);
    for (field, value) in [
        ("resource", json!("Location")),
        ("resource", json!("User")),
        ("resource_id", json!(other_contact)),
        ("resource_id", json!(t.location_id())),
        ("id", json!(other_contact)),
        ("created_ts", json!(1)),
    ] {
        let r = t
            .put(&path, json!({ "note": { field: value, "note": "sneaky" } }))
            .expect(422);
        assert!(!r.errors(field).is_empty(), "{field}: {}", r.text);
    }
    let after = t.get(&path).expect(200);
    assert_eq!(after.body["note"], *u, "refused updates change nothing");
    // Each field alone, and clearing.
    let r = t.put(&path, json!({ "note": { "note": "third" } })).expect(200);
    assert_eq!(r.body["note"]["note"], "third");
    assert_eq!(r.body["note"]["visibility_group_id"], group);
    let r = t
        .put(&path, json!({ "note": { "visibility_group_id": null } }))
        .expect(200);
    assert_eq!(r.body["note"]["visibility_group_id"], Value::Null);
    assert_eq!(r.body["note"]["note"], "third");
    let r = t.put(&path, json!({ "note": {} })).expect(200);
    assert_eq!(r.body["note"]["note"], "third", "an empty update is allowed");
}

fn note_lifecycle_links_and_filters(app: &TestApp) {
    let t = app.bootstrap();
    let c1 = str_of(&t.contact(json!({}))["id"]);
    let c2 = str_of(&t.contact(json!({ "last_name": "Two" }))["id"]);
    let n1 = note(&t, "Contact", &c1, "about one");
    let n2 = note(&t, "Contact", &c1, "more about one");
    let n3 = note(&t, "Contact", &c2, "about two");
    let n4 = note(&t, "Location", &t.location_id(), "about the shop");
    let id1 = str_of(&n1["id"]);
    assert!((24..=36).contains(&id1.len()));
    assert_eq!(n1["note"], "about one");
    assert_eq!(n1["created_ts"].as_i64().unwrap().to_string().len(), 10);
    assert_eq!(n1["visibility_group_id"], Value::Null);
    // _links: self is the note under the record it annotates (as the
    // reference links it), `for` that record.
    let self_href = str_of(&n1["_links"]["self"]["href"]);
    assert_eq!(self_href, format!("{}/v2/contacts/{c1}/notes/{id1}", app.base));
    let via_self = t.get(&self_href[app.base.len()..]).expect(200);
    assert_eq!(via_self.body["note"], n1, "self link leads to the note");
    let for_href = str_of(&n1["_links"]["for"]["href"]);
    assert_eq!(for_href, format!("{}/v2/contacts/{c1}", app.base));
    let parent = t.get(&for_href[app.base.len()..]).expect(200);
    assert_eq!(parent.body["contact"]["id"], c1);
    assert_eq!(
        n4["_links"]["for"]["href"],
        format!("{}/v2/locations/{}", app.base, t.location_id())
    );

    let read = t.get(&format!("/v2/notes/{id1}")).expect(200);
    assert_eq!(read.body["note"], n1);

    let all = t.get("/v2/notes").expect(200);
    let want: BTreeSet<String> = [&n1, &n2, &n3, &n4].iter().map(|n| str_of(&n["id"])).collect();
    assert_eq!(ids(&all), want);
    for listed in all.body["notes"].as_array().unwrap() {
        assert!(listed["_links"]["self"]["href"].is_string());
        assert!(listed["_links"]["for"]["href"].is_string());
    }
    let by_parent = t.get(&format!("/v2/notes?resource_id={c1}")).expect(200);
    assert_eq!(
        ids(&by_parent),
        [str_of(&n1["id"]), str_of(&n2["id"])].into_iter().collect()
    );
    let by_both = t
        .get(&format!("/v2/notes?resource=Contact&resource_id={c2}"))
        .expect(200);
    assert_eq!(ids(&by_both), [str_of(&n3["id"])].into_iter().collect());
    let by_kind = t.get("/v2/notes?resource=Location").expect(200);
    assert_eq!(ids(&by_kind), [str_of(&n4["id"])].into_iter().collect());
    let none = t
        .get(&format!(
            "/v2/notes?resource_id={}",
            uuid::Uuid::new_v4().simple()
        ))
        .expect(200);
    assert!(ids(&none).is_empty());
    t.get("/v2/notes?colour=red").expect(422);
    // The reference's names for the record: model_id and model_name.
    let by_model = t
        .get(&format!("/v2/notes?model_id={c1}&model_name=Contact"))
        .expect(200);
    assert_eq!(
        ids(&by_model),
        [str_of(&n1["id"]), str_of(&n2["id"])].into_iter().collect()
    );
    assert!(ids(&t
        .get(&format!("/v2/notes?model_id={c1}&model_name=Location"))
        .expect(200))
    .is_empty());
    t.get("/v2/notes?model_name=Planet").expect(422);
    // Under the record: its notes only; another record's note is not
    // found there.
    let nested = t.get(&format!("/v2/contacts/{c1}/notes")).expect(200);
    assert_eq!(
        ids(&nested),
        [str_of(&n1["id"]), str_of(&n2["id"])].into_iter().collect()
    );
    let id3 = str_of(&n3["id"]);
    t.get(&format!("/v2/contacts/{c1}/notes/{id3}")).expect(404);
    t.put(
        &format!("/v2/contacts/{c1}/notes/{id3}"),
        json!({ "note": { "note": "moved?" } }),
    )
    .expect(404);
    t.delete(&format!("/v2/contacts/{c1}/notes/{id3}")).expect(404);
    let edited = t
        .put(
            &format!("/v2/contacts/{c2}/notes/{id3}"),
            json!({ "note": { "note": "about two, edited" } }),
        )
        .expect(200);
    assert_eq!(edited.body["note"]["note"], "about two, edited");
    assert_eq!(
        ids(&t
            .get(&format!("/v2/locations/{}/notes", t.location_id()))
            .expect(200)),
        [str_of(&n4["id"])].into_iter().collect()
    );
    let other = app.bootstrap();
    other.get(&format!("/v2/contacts/{c1}/notes")).expect(404);
    other.get(&format!("/v2/contacts/{c1}/notes/{id1}")).expect(404);

    let r = t.delete(&format!("/v2/notes/{id1}")).expect(204);
    assert!(r.text.is_empty());
    t.get(&format!("/v2/notes/{id1}")).expect(404);
    t.delete(&format!("/v2/notes/{id1}")).expect(404);
    t.put(&format!("/v2/notes/{id1}"), json!({ "note": { "note": "x" } }))
        .expect(404);
    assert_eq!(
        ids(&t.get(&format!("/v2/notes?resource_id={c1}")).expect(200)).len(),
        1
    );
    t.get(&format!("/v2/contacts/{c1}")).expect(200);
}

fn notes_die_with_their_contact(app: &TestApp) {
    let t = app.bootstrap();
    let c1 = str_of(&t.contact(json!({}))["id"]);
    let c2 = str_of(&t.contact(json!({ "last_name": "Stays" }))["id"]);
    let a = str_of(&note(&t, "Contact", &c1, "a")["id"]);
    let b = str_of(&note(&t, "contact", &c1, "b")["id"]);
    let keep = str_of(&note(&t, "Contact", &c2, "keep")["id"]);
    let r = t.get(&format!("/v2/contacts/{c1}?expand=notes")).expect(200);
    assert_eq!(r.body["contact"]["notes"].as_array().unwrap().len(), 2);
    t.delete(&format!("/v2/contacts/{c1}")).expect(204);
    for id in [&a, &b] {
        t.get(&format!("/v2/notes/{id}")).expect(404);
    }
    assert!(ids(&t.get(&format!("/v2/notes?resource_id={c1}")).expect(200)).is_empty());
    t.get(&format!("/v2/notes/{keep}")).expect(200);
    assert_eq!(
        ids(&t.get("/v2/notes").expect(200)),
        [keep.clone()].into_iter().collect()
    );
}

/// Deleting a user that carries notes either refuses (409) or takes the
/// notes along; it never leaves notes pointing at a record that is gone.
fn notes_do_not_outlive_their_user(app: &TestApp) {
    let t = app.bootstrap();
    let (user, _) = t.user(&t.location_id(), None);
    let n = str_of(&note(&t, "User", &user, "prefers email")["id"]);
    let r = t.delete(&format!("/v2/users/{user}"));
    match r.status {
        409 => {
            assert!(r.body["errors"].is_object(), "{}", r.text);
            t.get(&format!("/v2/users/{user}")).expect(200);
            t.get(&format!("/v2/notes/{n}")).expect(200);
        }
        204 => {
            t.get(&format!("/v2/users/{user}")).expect(404);
            let left = t.get(&format!("/v2/notes/{n}"));
            assert_eq!(
                left.status, 404,
                "the note of a deleted user is left behind: {}",
                left.text
            );
        }
        s => panic!("unexpected status {s}: {}", r.text),
    }
}

fn notes_are_scoped(app: &TestApp) {
    let t = app.bootstrap();
    let other = app.bootstrap();
    let own = t.location_id();
    let child = t.location(&own, "Branch");
    let parent_contact = str_of(&t.contact(json!({}))["id"]);
    let child_contact = str_of(&t.contact(json!({ "location_id": child, "last_name": "Kid" }))["id"]);
    let on_parent = str_of(&note(&t, "Contact", &parent_contact, "parent")["id"]);
    let on_child = str_of(&note(&t, "Contact", &child_contact, "child")["id"]);
    let (uid, key) = t.user(&child, Some("132"));
    let uc = t.as_user(&uid, &key);
    uc.get(&format!("/v2/notes/{on_child}")).expect(200);
    uc.get(&format!("/v2/notes/{on_parent}")).expect(404);
    uc.put(
        &format!("/v2/notes/{on_parent}"),
        json!({ "note": { "note": "x" } }),
    )
    .expect(404);
    uc.delete(&format!("/v2/notes/{on_parent}")).expect(404);
    assert_eq!(
        ids(&uc.get("/v2/notes").expect(200)),
        [on_child.clone()].into_iter().collect()
    );
    // Attaching a note to a record outside one's scope is refused.
    let r = uc
        .post(
            "/v2/notes",
            json!({ "note": { "resource": "Contact", "resource_id": parent_contact, "note": "x" } }),
        )
        .expect(422);
    assert!(!r.errors("resource_id").is_empty());
    let r = uc
        .post(
            "/v2/notes",
            json!({ "note": { "resource": "Location", "resource_id": own, "note": "x" } }),
        )
        .expect(422);
    assert!(!r.errors("resource_id").is_empty());
    // A note the child user writes is visible above.
    let mine = str_of(&note(&uc, "Location", &child, "from the branch")["id"]);
    t.get(&format!("/v2/notes/{mine}")).expect(200);
    // Another tenant sees none of it.
    for id in [&on_parent, &on_child, &mine] {
        other.get(&format!("/v2/notes/{id}")).expect(404);
        other.delete(&format!("/v2/notes/{id}")).expect(404);
    }
    assert!(ids(&other.get("/v2/notes").expect(200)).is_empty());
    // Read-only users read but do not write.
    let (rid, rkey) = t.user(&own, Some("2"));
    let ro = t.as_user(&rid, &rkey);
    ro.get(&format!("/v2/notes/{on_parent}")).expect(200);
    ro.post(
        "/v2/notes",
        json!({ "note": { "resource": "Contact", "resource_id": parent_contact } }),
    )
    .expect(403);
    ro.put(
        &format!("/v2/notes/{on_parent}"),
        json!({ "note": { "note": "x" } }),
    )
    .expect(403);
    ro.delete(&format!("/v2/notes/{on_parent}")).expect(403);
}

fn note_expands_and_changelogs(app: &TestApp) {
    let t = app.bootstrap();
    let contact = str_of(&t.contact(json!({}))["id"]);
    let (uid, key) = t.user(&t.location_id(), Some("132"));
    let writer = t.as_user(&uid, &key);
    let id = str_of(&note(&writer, "Contact", &contact, "v1")["id"]);
    t.put(&format!("/v2/notes/{id}"), json!({ "note": { "note": "v2" } }))
        .expect(200);
    let r = t
        .get(&format!("/v2/notes/{id}?expand=created_user,changelogs"))
        .expect(200);
    let n = &r.body["note"];
    assert_eq!(n["created_user"]["id"], uid, "the creator, not the last editor");
    assert_eq!(n["created_user"]["user_api_key"], Value::Null);
    let logs = n["changelogs"].as_array().expect("changelogs");
    assert_eq!(logs.len(), 2, "{}", n["changelogs"]);
    // Newest first.
    assert_eq!(logs[1]["action"], "CREATE");
    assert_eq!(logs[1]["model"], "Note");
    assert_eq!(logs[1]["model_id"], id);
    assert_eq!(logs[1]["user_id"], uid);
    assert_eq!(logs[0]["action"], "UPDATE");
    assert_eq!(logs[0]["user_id"], t.user_id());
    let details = logs[0]["changelog_details"].as_array().unwrap();
    assert_eq!(details.len(), 1, "{}", logs[0]);
    assert_eq!(details[0]["field"], "note");
    assert_eq!(details[0]["old_value"], "v1");
    // On the list too.
    let r = t.get("/v2/notes?expand=created_user").expect(200);
    assert_eq!(r.body["notes"][0]["created_user"]["id"], uid);
    // Without expand, nothing is embedded.
    let plain = t.get(&format!("/v2/notes/{id}")).expect(200);
    assert!(plain.body["note"].get("created_user").is_none());
    assert!(plain.body["note"].get("changelogs").is_none());
    let bad = t.get(&format!("/v2/notes/{id}?expand=contact")).expect(422);
    assert!(!bad.errors("expand").is_empty());
}
