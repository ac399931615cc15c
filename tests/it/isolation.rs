//! Tenant isolation: a user sees its own location and the ones below it,
//! nothing else. A record outside the caller's scope answers 404 exactly
//! like a record that never existed, never appears in a list, and cannot
//! be pointed at (422 naming the field). Tested as a matrix over every
//! served endpoint and every verb, with two tenants from two bootstraps,
//! and along the location tree (parent, child, grandchild, sibling).
//! Postback configs and their delivery log are in the matrix too: a
//! tenant's subscription, its deliveries and their payloads stay its own.

use crate::engine_tests;
use crate::support::{Resp, Tenant, TestApp};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

engine_tests!(
    cross_tenant_matrix,
    cross_tenant_api_id_and_upsert,
    hierarchy_child_sees_its_subtree_only,
    references_stay_at_their_location,
);

/// One tenant with a record of every resource.
struct World {
    t: Tenant,
    loc: String,
    child: String,
    contact: String,
    contact_api_id: String,
    note: String,
    tag: String,
    /// A hosted payment page on the cc product transaction.
    page: String,
    /// A quick invoice for the contact.
    invoice: String,
    /// The location's file storage.
    productfile: String,
    /// A terminal, its device secret (shown once), a device term on it
    /// and a signature on the vault.
    terminal: String,
    terminal_secret: String,
    deviceterm: String,
    signature: String,
    admin: String,
    extra_user: String,
    extra_key: String,
    /// The extra user's role (created through the API).
    aru: String,
    /// The admin's role (created by bootstrap).
    admin_aru: String,
    cc: String,
    ach: String,
    vault: String,
    vault_api_id: String,
    /// A card sale (from the vault), with an api id.
    sale: String,
    sale_api_id: String,
    /// An ACH debit.
    debit: String,
    /// The sale's batch.
    batch: String,
    /// The sale's Level 3 record.
    level3: String,
    /// A monthly recurring on the vault.
    recurring: String,
    /// A postback config for the tenant's contacts (with Basic auth, a
    /// signing secret and a product transaction), made before any contact.
    hook: String,
    hook_url: String,
    hook_user: String,
    hook_pass: String,
    hook_secret: String,
    /// The config's delivery of the contact's CREATE event (failed: the
    /// URL answers nothing).
    delivery: String,
}

fn id_of(resp: &Resp, key: &str) -> String {
    resp.body[key]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no {key}.id in {}", resp.text))
        .to_string()
}

/// Level 3 data valid for every card network.
fn level3_data() -> Value {
    json!({ "tax_rate": "8.00", "line_items": [{ "description": "Widget", "product_code": "WID-1",
        "quantity": "2", "unit_code": "EA", "unit_cost": "10.5", "tax_amount": "1.68", "tax_rate": "8",
        "commodity_code": "4410" }] })
}

/// A signing secret for a postback config: whsec_ and base64 of 32 bytes.
fn signing_secret() -> String {
    use base64::Engine as _;
    let key: [u8; 32] = rand::random();
    format!("whsec_{}", base64::engine::general_purpose::STANDARD.encode(key))
}

/// The config's delivery of `record`'s CREATE event, once every delivery
/// of the config has been attempted (so the log no longer changes): the
/// delivery row is written with the change, the attempt follows at once.
fn settled_delivery(t: &Tenant, hook: &str, record: &str) -> String {
    let start = Instant::now();
    loop {
        let r = t
            .get(&format!("/v2/postbackconfigs/{hook}/deliveries?page_size=100"))
            .expect(200);
        let log = r.body["postbackdeliveries"].as_array().expect("a list").clone();
        let found = log
            .iter()
            .find(|d| d["record_id"] == json!(record) && d["type"] == "CREATE");
        if let Some(d) = found {
            if log.iter().all(|d| d["status"] != "pending") {
                assert_eq!(d["status"], "failed", "nothing listens there: {d}");
                return d["id"].as_str().expect("a delivery id").to_string();
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the delivery log of {hook} never settled: {}",
            r.text
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn world(app: &TestApp, tag: &str) -> World {
    let t = app.bootstrap();
    let loc = t.location_id();
    let child = t.location(&loc, &format!("{tag} branch"));
    // Port 9 (discard) on loopback: every attempt fails, which is what a
    // redeliver needs.
    let hook_url = format!("http://127.0.0.1:9/{tag}-postbacks");
    let hook_user = format!("{tag}-hook-user");
    let hook_pass = format!("{tag}-hook-pass-{}", ghost());
    let hook_secret = signing_secret();
    let hook = id_of(
        &t.post(
            "/v2/postbackconfigs",
            json!({ "postbackconfig": { "location_id": loc, "resource": "contact", "url": hook_url,
                "product_transaction_id": t.cred("cc_product_transaction_id"),
                "on_create": 1, "on_update": 1, "on_delete": 1, "number_of_attempts": 1,
                "expands": "location,notes", "basic_auth_username": hook_user,
                "basic_auth_password": hook_pass, "signing_secret": hook_secret } }),
        )
        .expect(201),
        "postbackconfig",
    );
    let contact_api_id = format!("{tag}-crm-1");
    let contact = t.contact(json!({ "contact_api_id": contact_api_id, "first_name": tag }))["id"]
        .as_str()
        .unwrap()
        .to_string();
    let note = id_of(
        &t.post(
            "/v2/notes",
            json!({ "note": { "resource": "Contact", "resource_id": contact, "note": format!("{tag} note") } }),
        )
        .expect(201),
        "note",
    );
    let tag_id = id_of(
        &t.post(
            "/v2/tags",
            json!({ "tag": { "location_id": loc, "title": format!("{tag} tag") } }),
        )
        .expect(201),
        "tag",
    );
    let page = id_of(
        &t.post(
            "/v2/hostedpaymentpages",
            json!({ "hostedpaymentpage": { "location_id": loc, "title": format!("{tag} page"),
                "product_transaction_id": t.cred("cc_product_transaction_id") } }),
        )
        .expect(201),
        "hostedpaymentpage",
    );
    let invoice = id_of(
        &t.post(
            "/v2/quickinvoices",
            json!({ "quickinvoice": { "location_id": loc, "title": format!("{tag} invoice"), "due_date": "2030-01-15",
                "item_list": { "Bread": "4.00" }, "contact_id": contact, "allow_partial_pay": 1 } }),
        )
        .expect(201),
        "quickinvoice",
    );
    let productfile = id_of(
        &t.post(
            "/v2/productfiles",
            json!({ "productfile": { "location_id": loc, "title": format!("{tag} files") } }),
        )
        .expect(201),
        "productfile",
    );
    let (extra_user, extra_key) = t.user(&loc, None);
    let aru = id_of(
        &t.post(
            "/v2/authroleusers",
            json!({ "authroleuser": { "user_id": extra_user, "auth_role_id": "132" } }),
        )
        .expect(201),
        "authroleuser",
    );
    let admin = t.user_id();
    let admin_aru = t
        .get(&format!("/v2/authroleusers?user_id={admin}"))
        .expect(200)
        .body["authroleusers"][0]["id"]
        .as_str()
        .expect("bootstrap gives the admin a role")
        .to_string();
    let vault_api_id = format!("{tag}tok1");
    let vault = id_of(
        &t.post(
            "/v2/accountvaults",
            json!({ "accountvault": { "location_id": loc, "payment_method": "cc", "contact_id": contact,
                "account_number": "4111111111111111", "exp_date": "1240", "account_vault_api_id": vault_api_id } }),
        )
        .expect(201),
        "accountvault",
    );
    let sale_api_id = format!("{tag}-order-1");
    let sale = id_of(
        &t.post(
            "/v2/transactions",
            json!({ "transaction": { "action": "sale", "payment_method": "cc", "transaction_amount": "10.00",
                "account_vault_id": vault, "transaction_api_id": sale_api_id } }),
        )
        .expect(201),
        "transaction",
    );
    let debit = id_of(
        &t.post(
            "/v2/transactions",
            json!({ "transaction": { "action": "debit", "payment_method": "ach", "transaction_amount": "20.00",
                "product_transaction_id": t.cred("ach_product_transaction_id"), "ach_sec_code": "WEB",
                "routing": "072000326", "account_number": "123456789012", "account_type": "checking",
                "account_holder_name": format!("{tag} Holder") } }),
        )
        .expect(201),
        "transaction",
    );
    let batch = t.get(&format!("/v2/transactions/{sale}")).expect(200).body["transaction"]
        ["transaction_batch_id"]
        .as_str()
        .expect("the sale is in a batch")
        .to_string();
    let level3 = id_of(
        &t.post(
            "/v2/transactionlevel3s",
            json!({ "transactionlevel3": { "transaction_id": sale, "level3_data": level3_data() } }),
        )
        .expect(201),
        "transactionlevel3",
    );
    let recurring = id_of(
        &t.post(
            "/v2/recurrings",
            json!({ "recurring": { "location_id": loc, "account_vault_id": vault, "transaction_amount": "9.00",
                "interval": 1, "interval_type": "m", "start_date": "2031-01-31", "description": format!("{tag} plan") } }),
        )
        .expect(201),
        "recurring",
    );
    let created = t
        .post(
            "/v2/terminals",
            json!({ "terminal": { "location_id": loc, "serial_number": format!("{tag}-SN"),
                "terminal_manufacturer_id": format!("{tag}-maker"), "title": format!("{tag} lane") } }),
        )
        .expect(201);
    let terminal = id_of(&created, "terminal");
    let terminal_secret = created.body["terminal"]["terminal_secret"]
        .as_str()
        .expect("a terminal secret")
        .to_string();
    // Terms are shown on the terminal's device: a software one accepts.
    let device = crate::support::sim::Sim::start(&app.base, &terminal, &terminal_secret, &[]);
    let deviceterm = id_of(
        &t.post(
            "/v2/deviceterms",
            json!({ "deviceterm": { "location_id": loc, "terminal_id": terminal, "require_signature": 1,
                "terms_conditions": format!("{tag} terms"), "device_terms_api_id": format!("{tag}-terms-1") } }),
        )
        .expect(201),
        "deviceterm",
    );
    drop(device);
    let signature = id_of(
        &t.post(
            "/v2/signatures",
            json!({ "signature": { "resource": "AccountVault", "resource_id": vault,
                "signature": "iVBORw0KGgoAAAANSUhEUg==" } }),
        )
        .expect(201),
        "signature",
    );
    let delivery = settled_delivery(&t, &hook, &contact);
    World {
        recurring,
        hook,
        hook_url,
        hook_user,
        hook_pass,
        hook_secret,
        delivery,
        vault,
        vault_api_id,
        sale,
        sale_api_id,
        debit,
        batch,
        level3,
        cc: t.cred("cc_product_transaction_id"),
        ach: t.cred("ach_product_transaction_id"),
        t,
        loc,
        child,
        contact,
        contact_api_id,
        note,
        tag: tag_id,
        page,
        invoice,
        productfile,
        terminal,
        terminal_secret,
        deviceterm,
        signature,
        admin,
        extra_user,
        extra_key,
        aru,
        admin_aru,
    }
}

impl World {
    /// Every id and secret of this tenant: none may show up in another
    /// tenant's responses.
    fn secrets(&self) -> Vec<String> {
        vec![
            self.loc.clone(),
            self.child.clone(),
            self.contact.clone(),
            self.contact_api_id.clone(),
            self.note.clone(),
            self.tag.clone(),
            self.admin.clone(),
            self.extra_user.clone(),
            self.extra_key.clone(),
            self.aru.clone(),
            self.admin_aru.clone(),
            self.cc.clone(),
            self.ach.clone(),
            self.vault.clone(),
            self.vault_api_id.clone(),
            self.sale.clone(),
            self.sale_api_id.clone(),
            self.debit.clone(),
            self.batch.clone(),
            self.level3.clone(),
            self.recurring.clone(),
            self.hook.clone(),
            self.hook_url.clone(),
            self.hook_user.clone(),
            self.hook_pass.clone(),
            self.hook_secret.clone(),
            self.delivery.clone(),
            self.terminal.clone(),
            self.terminal_secret.clone(),
            self.deviceterm.clone(),
            self.signature.clone(),
            self.t.cred("developer_id"),
            self.t.cred("user_api_key"),
            self.t.cred("user_hash_key"),
        ]
    }

    /// Every record by its item path.
    fn items(&self) -> Vec<(&'static str, String)> {
        vec![
            ("/v2/contacts/{id}", self.contact.clone()),
            ("/v2/locations/{id}", self.loc.clone()),
            ("/v2/locations/{id}", self.child.clone()),
            ("/v2/locationinfos/{id}", self.loc.clone()),
            ("/v2/locationinfos/{id}", self.child.clone()),
            ("/v2/producttransactions/{id}", self.cc.clone()),
            ("/v2/producttransactions/{id}", self.ach.clone()),
            ("/v2/notes/{id}", self.note.clone()),
            ("/v2/tags/{id}", self.tag.clone()),
            ("/v2/hostedpaymentpages/{id}", self.page.clone()),
            ("/v2/quickinvoices/{id}", self.invoice.clone()),
            ("/v2/productfiles/{id}", self.productfile.clone()),
            ("/v2/terminals/{id}", self.terminal.clone()),
            ("/v2/deviceterms/{id}", self.deviceterm.clone()),
            ("/v2/signatures/{id}", self.signature.clone()),
            ("/v2/users/{id}", self.admin.clone()),
            ("/v2/users/{id}", self.extra_user.clone()),
            ("/v2/authroleusers/{id}", self.aru.clone()),
            ("/v2/authroleusers/{id}", self.admin_aru.clone()),
            ("/v2/accountvaults/{id}", self.vault.clone()),
            ("/v2/transactions/{id}", self.sale.clone()),
            ("/v2/transactions/{id}", self.debit.clone()),
            ("/v2/transactionbatches/{id}", self.batch.clone()),
            ("/v2/transactionlevel3s/{id}", self.level3.clone()),
            ("/v2/recurrings/{id}", self.recurring.clone()),
            ("/v2/postbackconfigs/{id}", self.hook.clone()),
            ("/v2/postbackdeliveries/{id}", self.delivery.clone()),
        ]
    }

    /// Everything the tenant's admin can read, in full: each record (with
    /// its change log where there is one) and each list.
    fn snapshot(&self) -> BTreeMap<String, Value> {
        let mut out = BTreeMap::new();
        for (template, id) in self.items() {
            let mut path = template.replace("{id}", &id);
            if [
                "/v2/contacts/",
                "/v2/locations/",
                "/v2/notes/",
                "/v2/tags/",
                "/v2/hostedpaymentpages/",
                "/v2/quickinvoices/",
                "/v2/terminals/",
                "/v2/users/",
                "/v2/accountvaults/",
                "/v2/transactions/",
                "/v2/recurrings/",
            ]
            .iter()
            .any(|p| path.starts_with(p))
            {
                path.push_str("?expand=changelogs");
            }
            if path.starts_with("/v2/postbackconfigs/") {
                path.push_str("?expand=changelogs,basic_auth_username,basic_auth_password");
            }
            if path.starts_with("/v2/postbackdeliveries/") {
                path.push_str("?expand=postback_config,data");
            }
            out.insert(path.clone(), self.t.get(&path).expect(200).body);
        }
        for list in [
            format!("/v2/postbackconfigs/{}/deliveries?expand=data", self.hook),
            "/v2/postbackconfigs".into(),
            "/v2/postbackdeliveries".into(),
        ]
        .into_iter()
        .chain(
            [
                "/v2/contacts",
                "/v2/locations",
                "/v2/locationinfos?relationship=all",
                "/v2/producttransactions",
                "/v2/notes",
                "/v2/tags",
                "/v2/hostedpaymentpages",
                "/v2/quickinvoices",
                "/v2/productfiles",
                "/v2/terminals",
                "/v2/deviceterms",
                "/v2/signatures",
                "/v2/users",
                "/v2/authroleusers",
                "/v2/accountvaults",
                "/v2/transactions",
                "/v2/transactionbatches",
                "/v2/recurrings",
            ]
            .map(String::from),
        ) {
            let path = format!(
                "{list}{}page_size=100",
                if list.contains('?') { "&" } else { "?" }
            );
            out.insert(path.clone(), self.t.get(&path).expect(200).body);
        }
        out
    }
}

/// A fresh id that names no record anywhere.
fn ghost() -> String {
    uuid::Uuid::now_v7().simple().to_string()
}

/// The body with its request id removed, to compare two answers.
fn comparable(resp: &Resp) -> Value {
    let mut v = resp.body.clone();
    if let Some(o) = v.as_object_mut() {
        o.remove("request_id");
    }
    v
}

/// What a response may be scanned for another tenant's ids: everything
/// but a list's `meta`, whose links echo the query string.
fn scannable(resp: &Resp) -> String {
    match &resp.body {
        Value::Object(o) if o.contains_key("meta") => {
            let mut o = o.clone();
            o.remove("meta");
            Value::Object(o).to_string()
        }
        _ => resp.text.clone(),
    }
}

#[derive(Debug, Clone)]
enum Expect {
    /// A JSON error with this status (404 outside the scope, 405 for a
    /// verb the endpoint does not serve).
    Error(u16),
    /// 422 whose errors name this field.
    Invalid(&'static str),
    /// 404, or a 422 naming this field: an address that is not the
    /// caller's either way.
    Hidden(&'static str),
    /// 200 list; `empty`: nothing at all matches.
    List { empty: bool },
    /// 200 with the caller's own record.
    Own,
    /// 200 with reference data every tenant shares (a BIN record).
    Shared,
}

struct Case {
    method: &'static str,
    template: &'static str,
    path: String,
    /// The same request naming a record that never existed: it must be
    /// answered identically (no existence oracle).
    ghost_path: Option<String>,
    body: Option<Value>,
    ghost_body: Option<Value>,
    expect: Expect,
}

fn case(method: &'static str, template: &'static str, path: String, expect: Expect) -> Case {
    Case {
        method,
        template,
        path,
        ghost_path: None,
        body: None,
        ghost_body: None,
        expect,
    }
}

/// Builds the matrix: tenant B acting on tenant A's records.
fn matrix(a: &World, b: &World) -> Vec<Case> {
    let mut cases = Vec::new();
    let not_found = Expect::Error(404);
    let not_served = Expect::Error(405);
    let put_body = |template: &str| -> Value {
        match template {
            "/v2/contacts/{id}" => json!({ "contact": { "first_name": "Mallory" } }),
            "/v2/locations/{id}" => json!({ "location": { "name": "Mallory", "parent_id": b.loc } }),
            "/v2/notes/{id}" => json!({ "note": { "note": "Mallory was here" } }),
            "/v2/tags/{id}" => json!({ "tag": { "title": "Mallory" } }),
            "/v2/productfiles/{id}" => json!({ "productfile": { "title": "Mallory" } }),
            "/v2/terminals/{id}" => json!({ "terminal": { "title": "Mallory", "sig_capture_enable": 0 } }),
            "/v2/deviceterms/{id}" => json!({ "deviceterm": { "terms_conditions": "Mallory" } }),
            "/v2/signatures/{id}" => json!({ "signature": { "resource": "Transaction" } }),
            "/v2/quickinvoices/{id}" => {
                json!({ "quickinvoice": { "title": "Mallory", "item_list": { "x": "1.00" } } })
            }
            "/v2/hostedpaymentpages/{id}" => {
                json!({ "hostedpaymentpage": { "title": "Mallory", "redirect_url_on_approve": "https://mallory.example/" } })
            }
            "/v2/users/{id}" => json!({ "user": { "first_name": "Mallory", "status": 0 } }),
            "/v2/locationinfos/{id}" => json!({ "locationinfo": { "name": "Mallory" } }),
            "/v2/producttransactions/{id}" => json!({ "producttransaction": { "title": "Mallory" } }),
            "/v2/authroleusers/{id}" => json!({ "authroleuser": { "auth_role_id": "1" } }),
            "/v2/accountvaults/{id}" => json!({ "accountvault": { "title": "Mallory" } }),
            "/v2/transactions/{id}" => json!({ "transaction": { "action": "void" } }),
            "/v2/transactionbatches/{id}" => json!({ "transactionbatch": { "is_open": 0 } }),
            "/v2/transactionlevel3s/{id}" => json!({ "transactionlevel3": { "level3_data": level3_data() } }),
            "/v2/postbackconfigs/{id}" => {
                json!({ "postbackconfig": { "url": "http://127.0.0.1:9/mallory", "is_active": 1, "on_update": 1 } })
            }
            "/v2/postbackdeliveries/{id}" => json!({ "postbackdelivery": { "status": "pending" } }),
            "/v2/recurrings/{id}" => json!({ "recurring": { "description": "Mallory" } }),
            other => panic!("no PUT body for {other}"),
        }
    };
    let served_put = [
        "/v2/accountvaults/{id}",
        "/v2/contacts/{id}",
        "/v2/locations/{id}",
        "/v2/notes/{id}",
        "/v2/tags/{id}",
        "/v2/hostedpaymentpages/{id}",
        "/v2/quickinvoices/{id}",
        "/v2/productfiles/{id}",
        "/v2/terminals/{id}",
        "/v2/users/{id}",
        "/v2/transactions/{id}",
        "/v2/postbackconfigs/{id}",
        "/v2/recurrings/{id}",
    ];
    let served_delete = [
        "/v2/accountvaults/{id}",
        "/v2/contacts/{id}",
        "/v2/locations/{id}",
        "/v2/notes/{id}",
        "/v2/tags/{id}",
        "/v2/hostedpaymentpages/{id}",
        "/v2/quickinvoices/{id}",
        "/v2/productfiles/{id}",
        "/v2/terminals/{id}",
        "/v2/users/{id}",
        "/v2/authroleusers/{id}",
        "/v2/transactionlevel3s/{id}",
        "/v2/postbackconfigs/{id}",
        "/v2/recurrings/{id}",
    ];

    // Each of A's records by id, with every verb.
    for (template, id) in a.items() {
        let path = template.replace("{id}", &id);
        let ghost_path = Some(template.replace("{id}", &ghost()));
        let mut c = case("GET", template, path.clone(), not_found.clone());
        c.ghost_path = ghost_path.clone();
        cases.push(c);
        let mut c = case(
            "PUT",
            template,
            path.clone(),
            if served_put.contains(&template) {
                not_found.clone()
            } else {
                not_served.clone()
            },
        );
        c.ghost_path = ghost_path.clone();
        c.body = Some(put_body(template));
        cases.push(c);
        let mut c = case(
            "DELETE",
            template,
            path.clone(),
            if served_delete.contains(&template) {
                not_found.clone()
            } else {
                not_served.clone()
            },
        );
        c.ghost_path = ghost_path.clone();
        cases.push(c);
        // POST to a transaction runs a follow-up action, as PUT does.
        let posts_update = template == "/v2/transactions/{id}";
        let mut c = case(
            "POST",
            template,
            path,
            if posts_update {
                not_found.clone()
            } else {
                not_served.clone()
            },
        );
        c.body = Some(if posts_update {
            put_body(template)
        } else {
            json!({})
        });
        c.ghost_path = ghost_path;
        cases.push(c);
    }

    // Every PUT action on A's transactions, and the ACH status simulator.
    for id in [&a.sale, &a.debit] {
        for tx in [
            json!({ "action": "authcomplete", "transaction_amount": "1.00" }),
            json!({ "action": "authincrement", "transaction_amount": "99.00" }),
            json!({ "action": "partialreversal", "transaction_amount": "1.00" }),
            json!({ "action": "tipadjust", "transaction_amount": "12.00" }),
            json!({ "action": "edit", "description": "Mallory" }),
            json!({ "action": "edit", "contact_id": b.contact }),
        ] {
            let template = "/v2/transactions/{id}";
            let mut c = case("PUT", template, template.replace("{id}", id), not_found.clone());
            c.ghost_path = Some(template.replace("{id}", &ghost()));
            c.body = Some(json!({ "transaction": tx }));
            cases.push(c);
        }
        let developer = "/v2/developer/transactions/{id}";
        for status in [133, 134, 201, 301, 331] {
            let mut c = case("PUT", developer, developer.replace("{id}", id), not_found.clone());
            c.ghost_path = Some(developer.replace("{id}", &ghost()));
            c.body = Some(json!({ "transaction": { "status_id": status } }));
            cases.push(c);
        }
        for method in ["GET", "POST", "DELETE"] {
            let mut c = case(
                method,
                developer,
                developer.replace("{id}", id),
                not_served.clone(),
            );
            c.ghost_path = Some(developer.replace("{id}", &ghost()));
            if method == "POST" {
                c.body = Some(json!({ "transaction": { "status_id": 133 } }));
            }
            cases.push(c);
        }
        // The ACH override and update, with valid bodies: the answer must
        // be the scope's 404, never what A's transaction would allow.
        for (template, body) in [
            ("/v2/transactions/{id}/override", json!({})),
            (
                "/v2/transactions/{id}/achupdate",
                json!({ "transaction": { "track_data": "T072000326T 123456789012O 1001",
                    "transaction_amount": "21.00" } }),
            ),
        ] {
            for method in ["POST", "GET", "PUT", "DELETE"] {
                let served = method == "POST";
                let mut c = case(
                    method,
                    template,
                    template.replace("{id}", id),
                    if served {
                        not_found.clone()
                    } else {
                        not_served.clone()
                    },
                );
                c.ghost_path = Some(template.replace("{id}", &ghost()));
                if method == "POST" || method == "PUT" {
                    c.body = Some(body.clone());
                }
                cases.push(c);
            }
        }
        let bininfo = "/v2/transactions/{id}/bininfo";
        let mut c = case("GET", bininfo, bininfo.replace("{id}", id), not_found.clone());
        c.ghost_path = Some(bininfo.replace("{id}", &ghost()));
        cases.push(c);
        for method in ["POST", "PUT", "DELETE"] {
            let mut c = case(method, bininfo, bininfo.replace("{id}", id), not_served.clone());
            c.ghost_path = Some(bininfo.replace("{id}", &ghost()));
            cases.push(c);
        }
    }
    // The actions on A's recurring.
    for action in [
        "skipPayment?skip_count=1",
        "deferPayment?defer_count=1",
        "placeOnHold",
        "activate",
    ] {
        let name = action.split('?').next().unwrap();
        let template: &'static str = Box::leak(format!("/v2/recurrings/{{id}}/{name}").into_boxed_str());
        let query = action.strip_prefix(name).unwrap_or_default();
        for method in ["POST", "GET", "PUT", "DELETE"] {
            let mut c = case(
                method,
                template,
                format!("{}{query}", template.replace("{id}", &a.recurring)),
                if method == "POST" {
                    not_found.clone()
                } else {
                    not_served.clone()
                },
            );
            c.ghost_path = Some(format!("{}{query}", template.replace("{id}", &ghost())));
            cases.push(c);
        }
    }
    // A's terminal: neither asked whether it is online nor cancelled.
    for template in [
        "/v2/terminals/{id}/isonline",
        "/v2/terminals/{id}/isOnline",
        "/v2/terminals/{id}/cancel",
    ] {
        let verb = if template.ends_with("cancel") {
            "POST"
        } else {
            "GET"
        };
        for method in ["POST", "GET", "PUT", "DELETE"] {
            let mut c = case(
                method,
                template,
                template.replace("{id}", &a.terminal),
                if method == verb {
                    not_found.clone()
                } else {
                    not_served.clone()
                },
            );
            c.ghost_path = Some(template.replace("{id}", &ghost()));
            cases.push(c);
        }
    }
    // The actions on A's quick invoice (naming B's own sale).
    for (action, verb) in [
        ("addTransaction", "PUT"),
        ("removeTransaction", "PUT"),
        ("resend", "POST"),
    ] {
        let template: &'static str = Box::leak(format!("/v2/quickinvoices/{{id}}/{action}").into_boxed_str());
        for method in ["POST", "GET", "PUT", "DELETE"] {
            let mut c = case(
                method,
                template,
                template.replace("{id}", &a.invoice),
                if method == verb {
                    not_found.clone()
                } else {
                    not_served.clone()
                },
            );
            c.ghost_path = Some(template.replace("{id}", &ghost()));
            if method == "PUT" || method == "POST" {
                c.body = Some(json!({ "quickinvoice": { "transaction_id": b.sale } }));
            }
            cases.push(c);
        }
    }
    // A's invoice's files: neither added nor removed by B.
    let files = "/v2/quickinvoices/{id}/files";
    for method in ["POST", "GET", "PUT", "DELETE"] {
        let mut c = case(
            method,
            files,
            files.replace("{id}", &a.invoice),
            if method == "POST" {
                not_found.clone()
            } else {
                not_served.clone()
            },
        );
        c.ghost_path = Some(files.replace("{id}", &ghost()));
        cases.push(c);
    }
    let file = "/v2/quickinvoices/{id}/files/{file_id}";
    let file_path = |invoice: &str| file.replace("{id}", invoice).replace("{file_id}", &ghost());
    for method in ["DELETE", "GET", "PUT", "POST"] {
        let mut c = case(
            method,
            file,
            file_path(&a.invoice),
            if method == "DELETE" {
                not_found.clone()
            } else {
                not_served.clone()
            },
        );
        c.ghost_path = Some(file_path(&ghost()));
        cases.push(c);
    }
    // A's test clock: neither read nor moved by B.
    let clock = "/v2/developer/testclock";
    let mut c = case(
        "GET",
        clock,
        format!("{clock}?location_id={}", a.loc),
        not_found.clone(),
    );
    c.ghost_path = Some(format!("{clock}?location_id={}", ghost()));
    cases.push(c);
    for method in ["POST", "PUT", "DELETE"] {
        let mut c = case(method, clock, clock.to_string(), not_served.clone());
        c.body = Some(json!({ "testclock": { "seconds": 60, "location_id": a.loc } }));
        cases.push(c);
    }
    let advance = "/v2/developer/testclock/advance";
    let mut c = case("POST", advance, advance.to_string(), not_found.clone());
    c.body = Some(json!({ "testclock": { "seconds": 60, "location_id": a.loc } }));
    c.ghost_body = Some(json!({ "testclock": { "seconds": 60, "location_id": ghost() } }));
    c.ghost_path = Some(advance.to_string());
    cases.push(c);
    for method in ["GET", "PUT", "DELETE"] {
        let mut c = case(method, advance, advance.to_string(), not_served.clone());
        c.body = Some(json!({ "testclock": { "seconds": 60, "location_id": a.loc } }));
        cases.push(c);
    }
    // Settling A's batch.
    let settle = "/v2/transactionbatches/{id}/settle";
    for method in ["POST", "GET", "PUT", "DELETE"] {
        let mut c = case(
            method,
            settle,
            settle.replace("{id}", &a.batch),
            if method == "POST" {
                not_found.clone()
            } else {
                not_served.clone()
            },
        );
        c.ghost_path = Some(settle.replace("{id}", &ghost()));
        if method != "GET" && method != "DELETE" {
            c.body = Some(json!({}));
        }
        cases.push(c);
    }
    // The delivery log of A's config (with its filters and expands), and
    // redelivering A's delivery (failed, so redeliverable by A itself).
    let log = "/v2/postbackconfigs/{id}/deliveries";
    for query in ["", "?expand=data,postback_config&page_size=100", "?status=failed"] {
        let mut c = case(
            "GET",
            log,
            format!("{}{query}", log.replace("{id}", &a.hook)),
            not_found.clone(),
        );
        c.ghost_path = Some(format!("{}{query}", log.replace("{id}", &ghost())));
        cases.push(c);
    }
    for method in ["POST", "PUT", "DELETE"] {
        let mut c = case(method, log, log.replace("{id}", &a.hook), not_served.clone());
        c.ghost_path = Some(log.replace("{id}", &ghost()));
        if method != "DELETE" {
            c.body = Some(json!({}));
        }
        cases.push(c);
    }
    let redeliver = "/v2/postbackdeliveries/{id}/redeliver";
    for method in ["POST", "GET", "PUT", "DELETE"] {
        let mut c = case(
            method,
            redeliver,
            redeliver.replace("{id}", &a.delivery),
            if method == "POST" {
                not_found.clone()
            } else {
                not_served.clone()
            },
        );
        c.ghost_path = Some(redeliver.replace("{id}", &ghost()));
        if method == "POST" || method == "PUT" {
            c.body = Some(json!({}));
        }
        cases.push(c);
    }

    // B's own records, changed to point into A.
    let own = |template: &'static str, id: &str, body: Value, ghost_body: Value, field: &'static str| Case {
        method: "PUT",
        template,
        path: template.replace("{id}", id),
        ghost_path: None,
        body: Some(body),
        ghost_body: Some(ghost_body),
        expect: Expect::Invalid(field),
    };
    let g = ghost();
    for action in ["addTransaction", "removeTransaction"] {
        let template: &'static str = Box::leak(format!("/v2/quickinvoices/{{id}}/{action}").into_boxed_str());
        cases.push(own(
            template,
            &b.invoice,
            json!({ "quickinvoice": { "transaction_id": a.sale } }),
            json!({ "quickinvoice": { "transaction_id": g } }),
            "transaction_id",
        ));
    }
    cases.push(own(
        "/v2/quickinvoices/{id}",
        &b.invoice,
        json!({ "quickinvoice": { "contact_id": a.contact } }),
        json!({ "quickinvoice": { "contact_id": g } }),
        "contact_id",
    ));
    cases.push(own(
        "/v2/locations/{id}",
        &b.child,
        json!({ "location": { "name": "moved", "parent_id": a.loc } }),
        json!({ "location": { "name": "moved", "parent_id": g } }),
        "parent_id",
    ));
    cases.push(own(
        "/v2/locations/{id}",
        &b.child,
        json!({ "location": { "name": "moved", "parent_id": a.child } }),
        json!({ "location": { "name": "moved", "parent_id": g } }),
        "parent_id",
    ));
    cases.push(own(
        "/v2/locations/{id}",
        &b.child,
        json!({ "location": { "name": "x", "parent_id": b.loc, "default_cc": a.cc } }),
        json!({ "location": { "name": "x", "parent_id": b.loc, "default_cc": g } }),
        "default_cc",
    ));
    cases.push(own(
        "/v2/contacts/{id}",
        &b.contact,
        json!({ "contact": { "location_id": a.loc } }),
        json!({ "contact": { "location_id": g } }),
        "location_id",
    ));
    cases.push(own(
        "/v2/notes/{id}",
        &b.note,
        json!({ "note": { "resource_id": a.contact } }),
        json!({ "note": { "resource_id": g } }),
        "resource_id",
    ));
    cases.push(own(
        "/v2/accountvaults/{id}",
        &b.vault,
        json!({ "accountvault": { "contact_id": a.contact } }),
        json!({ "accountvault": { "contact_id": g } }),
        "contact_id",
    ));
    cases.push(own(
        "/v2/transactions/{id}",
        &b.sale,
        json!({ "transaction": { "action": "edit", "contact_id": a.contact } }),
        json!({ "transaction": { "action": "edit", "contact_id": g } }),
        "contact_id",
    ));
    cases.push(own(
        "/v2/users/{id}",
        &b.extra_user,
        json!({ "user": { "primary_location_id": a.loc } }),
        json!({ "user": { "primary_location_id": g } }),
        "primary_location_id",
    ));
    // B's postback config subscribed to A's location or product transactions.
    for (fields, ghostly, field) in [
        (
            json!({ "location_id": a.loc }),
            json!({ "location_id": g }),
            "location_id",
        ),
        (
            json!({ "location_id": a.child }),
            json!({ "location_id": g }),
            "location_id",
        ),
        (
            json!({ "location_id": a.loc, "product_transaction_id": a.cc }),
            json!({ "location_id": g, "product_transaction_id": g }),
            "location_id",
        ),
        (
            json!({ "product_transaction_id": a.cc }),
            json!({ "product_transaction_id": g }),
            "product_transaction_id",
        ),
        (
            json!({ "product_transaction_id": a.ach }),
            json!({ "product_transaction_id": g }),
            "product_transaction_id",
        ),
        (
            json!({ "resource": "transaction", "product_transaction_id": a.cc }),
            json!({ "resource": "transaction", "product_transaction_id": g }),
            "product_transaction_id",
        ),
        (
            json!({ "resource": "transactionbatch", "product_transaction_id": a.cc }),
            json!({ "resource": "transactionbatch", "product_transaction_id": g }),
            "product_transaction_id",
        ),
    ] {
        cases.push(own(
            "/v2/postbackconfigs/{id}",
            &b.hook,
            json!({ "postbackconfig": fields }),
            json!({ "postbackconfig": ghostly }),
            field,
        ));
    }

    // Lists: never A's records, however they are filtered.
    let lists: &[(&'static str, &[(&str, &str)])] = &[
        (
            "/v2/contacts",
            &[
                ("id", &a.contact),
                ("location_id", &a.loc),
                ("location_id", &a.child),
                ("contact_api_id", &a.contact_api_id),
                ("first_name", "A"),
            ],
        ),
        (
            "/v2/locations",
            &[("id", &a.loc), ("id", &a.child), ("parent_id", &a.loc)],
        ),
        (
            "/v2/locationinfos",
            &[("id", &a.loc), ("id", &a.child), ("parent_id", &a.loc)],
        ),
        (
            "/v2/producttransactions",
            &[("id", &a.cc), ("id", &a.ach), ("location_id", &a.loc)],
        ),
        (
            "/v2/notes",
            &[("id", &a.note), ("resource_id", &a.contact), ("note", "A note")],
        ),
        (
            "/v2/tags",
            &[("id", &a.tag), ("location_id", &a.loc), ("title", "A tag")],
        ),
        (
            "/v2/productfiles",
            &[
                ("id", &a.productfile),
                ("location_id", &a.loc),
                ("title", "A files"),
            ],
        ),
        (
            "/v2/terminals",
            &[
                ("id", &a.terminal),
                ("location_id", &a.loc),
                ("serial_number", "A-SN"),
                ("terminal_manufacturer_id", "A-maker"),
                ("title", "A lane"),
            ],
        ),
        (
            "/v2/deviceterms",
            &[
                ("id", &a.deviceterm),
                ("location_id", &a.loc),
                ("terminal_id", &a.terminal),
                ("device_terms_api_id", "A-terms-1"),
            ],
        ),
        (
            "/v2/signatures",
            &[("id", &a.signature), ("resource_id", &a.vault)],
        ),
        (
            "/v2/quickinvoices",
            &[
                ("id", &a.invoice),
                ("location_id", &a.loc),
                ("contact_id", &a.contact),
                ("cc_product_transaction_id", &a.cc),
                ("title", "A invoice"),
            ],
        ),
        (
            "/v2/hostedpaymentpages",
            &[
                ("id", &a.page),
                ("location_id", &a.loc),
                ("product_transaction_id", &a.cc),
                ("title", "A page"),
            ],
        ),
        (
            "/v2/users",
            &[
                ("id", &a.admin),
                ("id", &a.extra_user),
                ("primary_location_id", &a.loc),
            ],
        ),
        (
            "/v2/accountvaults",
            &[
                ("id", &a.vault),
                ("location_id", &a.loc),
                ("contact_id", &a.contact),
                ("account_vault_api_id", &a.vault_api_id),
            ],
        ),
        (
            "/v2/transactions",
            &[
                ("id", &a.sale),
                ("id", &a.debit),
                ("location_id", &a.loc),
                ("contact_id", &a.contact),
                ("account_vault_id", &a.vault),
                ("product_transaction_id", &a.cc),
                ("product_transaction_id", &a.ach),
                ("transaction_batch_id", &a.batch),
                ("transaction_api_id", &a.sale_api_id),
                ("account_holder_name", "A Holder"),
            ],
        ),
        (
            "/v2/transactionbatches",
            &[
                ("id", &a.batch),
                ("location_id", &a.loc),
                ("product_transaction_id", &a.cc),
            ],
        ),
        (
            "/v2/authroleusers",
            &[
                ("id", &a.aru),
                ("id", &a.admin_aru),
                ("user_id", &a.admin),
                ("user_id", &a.extra_user),
            ],
        ),
        (
            "/v2/postbackconfigs",
            &[
                ("id", &a.hook),
                ("location_id", &a.loc),
                ("product_transaction_id", &a.cc),
                ("url", &a.hook_url),
                ("url", "A-postbacks"),
            ],
        ),
        (
            "/v2/recurrings",
            &[
                ("id", &a.recurring),
                ("location_id", &a.loc),
                ("account_vault_id", &a.vault),
                ("contact_id", &a.contact),
                ("product_transaction_id", &a.cc),
                ("description", "A plan"),
            ],
        ),
        (
            "/v2/postbackdeliveries",
            &[
                ("id", &a.delivery),
                ("postback_config_id", &a.hook),
                ("record_id", &a.contact),
            ],
        ),
    ];
    let plain: &[(&'static str, &str)] = &[
        (
            "/v2/contacts",
            "?expand=notes,location,created_user&page_size=100",
        ),
        (
            "/v2/locations",
            "?expand=parent,product_transactions&page_size=100",
        ),
        ("/v2/locationinfos", "?relationship=all&page_size=100"),
        ("/v2/locationinfos", "?relationship=child&page_size=100"),
        ("/v2/producttransactions", "?expand=location&page_size=100"),
        ("/v2/notes", "?expand=created_user&page_size=100"),
        ("/v2/tags", "?expand=created_user,changelogs&page_size=100"),
        (
            "/v2/hostedpaymentpages",
            "?expand=location,product_transaction,created_user,changelogs&page_size=100",
        ),
        (
            "/v2/quickinvoices",
            "?expand=contact,location,created_user,transactions,tags,files,changelogs&page_size=100",
        ),
        ("/v2/productfiles", "?expand=location,created_user&page_size=100"),
        (
            "/v2/terminals",
            "?expand=terminal_application,location,created_user,changelogs&page_size=100",
        ),
        (
            "/v2/deviceterms",
            "?expand=created_user,location,terminal,reason_code,signature&page_size=100",
        ),
        ("/v2/signatures", "?page_size=100"),
        ("/v2/users", "?expand=primary_location&page_size=100"),
        ("/v2/authroleusers", "?expand=user,created_user&page_size=100"),
        (
            "/v2/accountvaults",
            "?expand=contact,location,created_user,product_transaction&page_size=100",
        ),
        (
            "/v2/transactions",
            "?expand=contact,account_vault,transaction_batch,transaction_level3,changelogs,created_user&page_size=100",
        ),
        ("/v2/transactionbatches", "?page_size=100"),
        (
            "/v2/recurrings",
            "?expand=account_vault,contact,location,product_transaction,transactions,created_user,changelogs&page_size=100",
        ),
        (
            "/v2/postbackconfigs",
            "?expand=location,product_transaction,basic_auth_username,basic_auth_password,changelogs&page_size=100",
        ),
        (
            "/v2/postbackdeliveries",
            "?expand=postback_config,data&page_size=100",
        ),
    ];
    for (template, query) in plain {
        cases.push(case(
            "GET",
            template,
            format!("{template}{query}"),
            Expect::List { empty: false },
        ));
    }
    for (template, filters) in lists {
        for (k, v) in filters.iter() {
            let extra = if *template == "/v2/locationinfos" {
                "&relationship=all"
            } else {
                ""
            };
            cases.push(case(
                "GET",
                template,
                format!("{template}?{k}={}{extra}", v.replace(' ', "%20")),
                Expect::List { empty: true },
            ));
        }
        // Collections serve no PUT or DELETE.
        for method in ["PUT", "DELETE"] {
            let mut c = case(method, template, template.to_string(), not_served.clone());
            if method == "PUT" {
                c.body = Some(json!({}));
            }
            cases.push(c);
        }
    }
    // B's own config's delivery log: B's deliveries only, whatever the
    // filters name.
    let mine = log.replace("{id}", &b.hook);
    cases.push(case(
        "GET",
        log,
        format!("{mine}?expand=data,postback_config&page_size=100"),
        Expect::List { empty: false },
    ));
    for (k, v) in [
        ("id", &a.delivery),
        ("postback_config_id", &a.hook),
        ("record_id", &a.contact),
    ] {
        cases.push(case(
            "GET",
            log,
            format!("{mine}?{k}={v}"),
            Expect::List { empty: true },
        ));
    }

    // Creates that point into A: 422 naming the field, like a ghost id.
    let create = |template: &'static str, body: Value, ghost_body: Value, expect: Expect| Case {
        method: "POST",
        template,
        path: template.to_string(),
        ghost_path: None,
        body: Some(body),
        ghost_body: Some(ghost_body),
        expect,
    };
    // B's router requests on A's terminal: the terminal is not B's, as a
    // terminal that does not exist.
    let routed = |terminal: &str| {
        json!({ "routertransaction": { "payment_method": "cc", "action": "sale", "location_id": b.loc,
            "terminal_id": terminal, "transaction_amount": "1.00" } })
    };
    cases.push(create(
        "/v2/routertransactions",
        routed(&a.terminal),
        routed(&ghost()),
        Expect::Invalid("terminal_id"),
    ));
    let stored = |terminal: &str| {
        json!({ "routeraccountvault": { "payment_method": "cc", "action": "store", "location_id": b.loc,
            "contact_id": b.contact, "terminal_id": terminal } })
    };
    cases.push(create(
        "/v2/routeraccountvaults",
        stored(&a.terminal),
        stored(&ghost()),
        Expect::Invalid("terminal_id"),
    ));
    for template in ["/v2/routertransactions", "/v2/routeraccountvaults"] {
        for method in ["GET", "PUT", "DELETE"] {
            cases.push(case(method, template, template.to_string(), not_served.clone()));
        }
    }
    for target in [&a.loc, &a.child] {
        cases.push(create(
            "/v2/contacts",
            json!({ "contact": { "location_id": target, "last_name": "Mallory" } }),
            json!({ "contact": { "location_id": g, "last_name": "Mallory" } }),
            Expect::Invalid("location_id"),
        ));
        cases.push(create(
            "/v2/tags",
            json!({ "tag": { "location_id": target, "title": "Mallory" } }),
            json!({ "tag": { "location_id": g, "title": "Mallory" } }),
            Expect::Invalid("location_id"),
        ));
        cases.push(create(
            "/v2/productfiles",
            json!({ "productfile": { "location_id": target, "title": "Mallory" } }),
            json!({ "productfile": { "location_id": g, "title": "Mallory" } }),
            Expect::Invalid("location_id"),
        ));
        cases.push(create(
            "/v2/terminals",
            json!({ "terminal": { "location_id": target, "serial_number": "Mallory" } }),
            json!({ "terminal": { "location_id": g, "serial_number": "Mallory" } }),
            Expect::Invalid("location_id"),
        ));
        let term = |location: &str| {
            json!({ "deviceterm": { "location_id": location, "terminal_id": b.terminal, "require_signature": 0,
                "terms_conditions": "Mallory", "device_terms_api_id": "A-terms-1" } })
        };
        cases.push(create(
            "/v2/deviceterms",
            term(target),
            term(&g),
            Expect::Invalid("location_id"),
        ));
        cases.push(create(
            "/v2/quickinvoices",
            json!({ "quickinvoice": { "location_id": target, "title": "Mallory", "due_date": "2030-01-01",
                "item_list": { "x": "1.00" } } }),
            json!({ "quickinvoice": { "location_id": g, "title": "Mallory", "due_date": "2030-01-01",
                "item_list": { "x": "1.00" } } }),
            Expect::Invalid("location_id"),
        ));
        cases.push(create(
            "/v2/hostedpaymentpages",
            json!({ "hostedpaymentpage": { "location_id": target, "title": "Mallory", "product_transaction_id": b.cc } }),
            json!({ "hostedpaymentpage": { "location_id": g, "title": "Mallory", "product_transaction_id": b.cc } }),
            Expect::Invalid("location_id"),
        ));
        cases.push(create(
            "/v2/contacts",
            json!({ "contact": { "location_id": target, "last_name": "Mallory",
                "contact_api_id": a.contact_api_id, "update_if_exists": 1 } }),
            json!({ "contact": { "location_id": g, "last_name": "Mallory",
                "contact_api_id": a.contact_api_id, "update_if_exists": 1 } }),
            Expect::Invalid("location_id"),
        ));
        cases.push(create(
            "/v2/locations",
            json!({ "location": { "parent_id": target, "name": "Mallory", "branding_domain_url": "evil.example.com" } }),
            json!({ "location": { "parent_id": g, "name": "Mallory", "branding_domain_url": "evil.example.com" } }),
            Expect::Invalid("parent_id"),
        ));
        cases.push(create(
            "/v2/users",
            json!({ "user": { "primary_location_id": target, "username": format!("m{}", ghost()),
                "email": "m@example.com", "user_api_key": format!("K{}", ghost()) } }),
            json!({ "user": { "primary_location_id": g, "username": format!("m{}", ghost()),
                "email": "m@example.com", "user_api_key": format!("K{}", ghost()) } }),
            Expect::Invalid("primary_location_id"),
        ));
    }
    for (resource, id) in [
        ("Contact", &a.contact),
        ("Location", &a.loc),
        ("Location", &a.child),
        ("User", &a.admin),
        ("User", &a.extra_user),
    ] {
        cases.push(create(
            "/v2/notes",
            json!({ "note": { "resource": resource, "resource_id": id, "note": "Mallory" } }),
            json!({ "note": { "resource": resource, "resource_id": g, "note": "Mallory" } }),
            Expect::Invalid("resource_id"),
        ));
    }
    let card = |location: &str, contact: &str| {
        json!({ "accountvault": { "location_id": location, "payment_method": "cc", "contact_id": contact,
            "account_number": "5454545454545454", "exp_date": "1240" } })
    };
    cases.push(create(
        "/v2/accountvaults",
        card(&a.loc, &b.contact),
        card(&g, &b.contact),
        Expect::Invalid("location_id"),
    ));
    cases.push(create(
        "/v2/accountvaults",
        card(&b.loc, &a.contact),
        card(&b.loc, &g),
        Expect::Invalid("contact_id"),
    ));
    // Transactions that name A's records.
    let pay = |fields: Value| {
        let mut tx = json!({ "action": "sale", "payment_method": "cc", "transaction_amount": "3.00" });
        for (k, v) in fields.as_object().unwrap() {
            tx[k] = v.clone();
        }
        json!({ "transaction": tx })
    };
    let card_of_b = json!({ "account_number": "4111111111111111", "exp_date": "1240" });
    let with_card = |field: &str, value: &str| {
        let mut f = card_of_b.clone();
        f[field] = json!(value);
        pay(f)
    };
    for (field, theirs, ghostly) in [
        ("location_id", a.loc.clone(), g.clone()),
        ("location_id", a.child.clone(), g.clone()),
        ("contact_id", a.contact.clone(), g.clone()),
        ("contact_api_id", a.contact_api_id.clone(), ghost()),
        ("product_transaction_id", a.cc.clone(), g.clone()),
    ] {
        cases.push(create(
            "/v2/transactions",
            with_card(field, &theirs),
            with_card(field, &ghostly),
            Expect::Invalid(field),
        ));
    }
    for (field, theirs, ghostly) in [
        ("account_vault_id", a.vault.clone(), g.clone()),
        ("account_vault_api_id", a.vault_api_id.clone(), ghost()),
        ("previous_transaction_id", a.sale.clone(), g.clone()),
        ("previous_transaction_api_id", a.sale_api_id.clone(), ghost()),
    ] {
        for action in ["sale", "authonly", "refund"] {
            let body = |v: &str| pay(json!({ "action": action, field: v }));
            cases.push(create(
                "/v2/transactions",
                body(&theirs),
                body(&ghostly),
                Expect::Invalid(field),
            ));
        }
    }
    let debit = |pt: &str| {
        json!({ "transaction": { "action": "debit", "payment_method": "ach", "transaction_amount": "20.00",
            "product_transaction_id": pt, "ach_sec_code": "WEB", "routing": "072000326",
            "account_number": "123456789012", "account_type": "checking", "account_holder_name": "Mallory" } })
    };
    cases.push(create(
        "/v2/transactions",
        debit(&a.ach),
        debit(&g),
        Expect::Invalid("product_transaction_id"),
    ));
    // B's device term on A's terminal, B's signatures on A's records.
    let term = |terminal: &str| {
        json!({ "deviceterm": { "location_id": b.loc, "terminal_id": terminal, "require_signature": 0,
            "terms_conditions": "Mallory" } })
    };
    cases.push(create(
        "/v2/deviceterms",
        term(&a.terminal),
        term(&g),
        Expect::Invalid("terminal_id"),
    ));
    for (resource, id) in [
        ("AccountVault", &a.vault),
        ("Transaction", &a.sale),
        ("Transaction", &a.debit),
        ("Recurring", &a.recurring),
    ] {
        let sign = |id: &str| {
            json!({ "signature": { "resource": resource, "resource_id": id,
                "signature": "iVBORw0KGgoAAAANSUhEUg==" } })
        };
        cases.push(create(
            "/v2/signatures",
            sign(id),
            sign(&g),
            Expect::Invalid("resource_id"),
        ));
    }
    // A page of B's own location on A's product transaction.
    let page = |pt: &str| json!({ "hostedpaymentpage": { "location_id": b.loc, "title": "Mallory", "product_transaction_id": pt } });
    cases.push(create(
        "/v2/hostedpaymentpages",
        page(&a.cc),
        page(&g),
        Expect::Invalid("product_transaction_id"),
    ));
    // B's invoice on A's product transaction or for A's contact.
    let invoice = |field: &str, value: &str| {
        let mut q = json!({ "location_id": b.loc, "title": "Mallory", "due_date": "2030-01-01", "item_list": { "x": "1.00" } });
        q[field] = json!(value);
        json!({ "quickinvoice": q })
    };
    for (field, value) in [
        ("cc_product_transaction_id", &a.cc),
        ("ach_product_transaction_id", &a.ach),
        ("contact_id", &a.contact),
    ] {
        let name: &'static str = Box::leak(field.to_string().into_boxed_str());
        cases.push(create(
            "/v2/quickinvoices",
            invoice(field, value),
            invoice(field, &g),
            Expect::Invalid(name),
        ));
    }
    // Recurrings that name A's records.
    let plan = |fields: Value| {
        let mut r = json!({ "location_id": b.loc, "account_vault_id": b.vault, "transaction_amount": "4.00",
            "interval": 1, "interval_type": "m", "start_date": "2031-02-01" });
        for (k, v) in fields.as_object().unwrap() {
            r[k] = v.clone();
        }
        json!({ "recurring": r })
    };
    for (field, theirs, ghostly) in [
        ("location_id", a.loc.clone(), g.clone()),
        ("account_vault_id", a.vault.clone(), g.clone()),
        ("product_transaction_id", a.cc.clone(), g.clone()),
    ] {
        cases.push(create(
            "/v2/recurrings",
            plan(json!({ field: theirs })),
            plan(json!({ field: ghostly })),
            Expect::Invalid(field),
        ));
    }
    cases.push(create(
        "/v2/recurrings",
        plan(json!({ "account_vault_id": null, "account_vault_api_id": a.vault_api_id })),
        plan(json!({ "account_vault_id": null, "account_vault_api_id": ghost() })),
        Expect::Invalid("account_vault_api_id"),
    ));
    // Level 3 data on A's transactions; the collection serves POST only.
    let level3s = "/v2/transactionlevel3s";
    for id in [&a.sale, &a.debit] {
        cases.push(create(
            level3s,
            json!({ "transactionlevel3": { "transaction_id": id, "level3_data": level3_data() } }),
            json!({ "transactionlevel3": { "transaction_id": g, "level3_data": level3_data() } }),
            Expect::Invalid("transaction_id"),
        ));
    }
    for method in ["GET", "PUT", "DELETE"] {
        let mut c = case(method, level3s, level3s.to_string(), not_served.clone());
        if method == "PUT" {
            c.body = Some(json!({}));
        }
        cases.push(c);
    }
    let mut c = case(
        "POST",
        "/v2/transactionbatches",
        "/v2/transactionbatches".into(),
        not_served.clone(),
    );
    c.body = Some(json!({ "transactionbatch": { "product_transaction_id": a.cc } }));
    cases.push(c);

    // Card-updater subscriptions of A's vaults or product transactions.
    let updates = "/v2/accountvaultupdates";
    cases.push(create(
        updates,
        json!({ "accountvaultupdate": { "account_vault_id": [a.vault] } }),
        json!({ "accountvaultupdate": { "account_vault_id": [g] } }),
        Expect::Invalid("account_vault_id"),
    ));
    cases.push(create(
        updates,
        json!({ "accountvaultupdate": { "product_transaction_id": [a.cc] } }),
        json!({ "accountvaultupdate": { "product_transaction_id": [g] } }),
        Expect::Invalid("product_transaction_id"),
    ));
    for method in ["GET", "PUT", "DELETE"] {
        cases.push(case(method, updates, updates.to_string(), not_served.clone()));
    }
    let bininfo = "/v2/accountvaults/{id}/bininfo";
    let mut c = case(
        "GET",
        bininfo,
        bininfo.replace("{id}", &a.vault),
        not_found.clone(),
    );
    c.ghost_path = Some(bininfo.replace("{id}", &ghost()));
    cases.push(c);
    for method in ["POST", "PUT", "DELETE"] {
        cases.push(case(
            method,
            bininfo,
            bininfo.replace("{id}", &a.vault),
            not_served.clone(),
        ));
    }
    // "1" is a role A's admin already holds: the answer must not say so.
    for (user, role) in [(&a.extra_user, "2"), (&a.extra_user, "132"), (&a.admin, "1")] {
        cases.push(create(
            "/v2/authroleusers",
            json!({ "authroleuser": { "user_id": user, "auth_role_id": role } }),
            json!({ "authroleuser": { "user_id": g, "auth_role_id": role } }),
            Expect::Invalid("user_id"),
        ));
    }
    // Postback configs subscribed to A's locations or product transactions.
    let hook = |location: &str, resource: &str, pt: Option<&str>| {
        let mut c = json!({ "location_id": location, "resource": resource,
            "url": "http://127.0.0.1:9/mallory", "on_create": 1, "on_update": 1, "on_delete": 1 });
        if let Some(pt) = pt {
            c["product_transaction_id"] = json!(pt);
        }
        json!({ "postbackconfig": c })
    };
    let configs = "/v2/postbackconfigs";
    for target in [&a.loc, &a.child] {
        for resource in ["contact", "accountvault"] {
            cases.push(create(
                configs,
                hook(target, resource, None),
                hook(&g, resource, None),
                Expect::Invalid("location_id"),
            ));
        }
        cases.push(create(
            configs,
            hook(target, "transaction", Some(&a.cc)),
            hook(&g, "transaction", Some(&g)),
            Expect::Invalid("location_id"),
        ));
    }
    for resource in ["contact", "transaction", "transactionbatch"] {
        for pt in [&a.cc, &a.ach] {
            cases.push(create(
                configs,
                hook(&b.loc, resource, Some(pt)),
                hook(&b.loc, resource, Some(&g)),
                Expect::Invalid("product_transaction_id"),
            ));
        }
    }
    // The delivery log is written by the server only.
    let mut c = case(
        "POST",
        "/v2/postbackdeliveries",
        "/v2/postbackdeliveries".into(),
        not_served.clone(),
    );
    c.body = Some(
        json!({ "postbackdelivery": { "postback_config_id": a.hook, "resource": "contact",
        "type": "CREATE", "record_id": a.contact } }),
    );
    cases.push(c);
    for template in ["/v2/locationinfos", "/v2/producttransactions"] {
        let name = template.trim_start_matches("/v2/").trim_end_matches('s');
        let mut c = create(
            template,
            json!({ name: { "location_id": a.loc } }),
            json!({ name: { "location_id": g } }),
            not_served.clone(),
        );
        c.ghost_body = None;
        cases.push(c);
    }

    // BIN lookup: reference data, the same for every tenant.
    let bin = "/v2/bins/{bin}";
    cases.push(case("GET", bin, "/v2/bins/411111".into(), Expect::Shared));
    for method in ["POST", "PUT", "DELETE"] {
        cases.push(case(method, bin, "/v2/bins/411111".into(), not_served.clone()));
    }

    // The users extras.
    cases.push(case("GET", "/v2/users/me", "/v2/users/me".into(), Expect::Own));
    for method in ["POST", "PUT", "DELETE"] {
        let mut c = case(method, "/v2/users/me", "/v2/users/me".into(), not_served.clone());
        if method != "DELETE" {
            c.body = Some(json!({ "user": { "first_name": "x" } }));
        }
        cases.push(c);
    }
    for user in [&a.admin, &a.extra_user] {
        for template in [
            "/v2/users/{id}/generateuserapikey",
            "/v2/users/{id}/generateemulatorkey",
        ] {
            let ghost_path = Some(template.replace("{id}", &ghost()));
            let path = template.replace("{id}", user);
            let mut c = case("POST", template, path.clone(), not_found.clone());
            c.ghost_path = ghost_path.clone();
            cases.push(c);
            for method in ["GET", "PUT", "DELETE"] {
                let mut c = case(method, template, path.clone(), not_served.clone());
                c.ghost_path = ghost_path.clone();
                cases.push(c);
            }
        }
    }
    cases
}

fn send(t: &Tenant, method: &str, path: &str, body: &Option<Value>) -> Resp {
    let text = body.as_ref().map(Value::to_string);
    t.send(method, path, text.as_deref())
}

fn run_case(b: &World, a_secrets: &[String], c: &Case) {
    let what = format!("{} {} (as tenant B)", c.method, c.path);
    let r = send(&b.t, c.method, &c.path, &c.body);
    let scan = scannable(&r);
    for s in a_secrets {
        assert!(
            !scan.contains(s.as_str()),
            "{what}: the answer shows A's {s}: {}",
            r.text
        );
    }
    match &c.expect {
        Expect::Error(status) => {
            assert_eq!(r.status, *status, "{what}: body {}", r.text);
            assert!(
                r.body["message"].is_string(),
                "{what}: a JSON error body is expected, got {:?}",
                r.text
            );
        }
        Expect::Invalid(field) => {
            assert_eq!(r.status, 422, "{what}: body {}", r.text);
            assert!(
                !r.errors(field).is_empty(),
                "{what}: the errors must name {field}: {}",
                r.text
            );
        }
        Expect::Hidden(field) => {
            assert!(
                r.status == 404 || (r.status == 422 && !r.errors(field).is_empty()),
                "{what}: expected 404 or 422 naming {field}, got {} {}",
                r.status,
                r.text
            );
        }
        Expect::List { empty } => {
            assert_eq!(r.status, 200, "{what}: body {}", r.text);
            let key = match c.template {
                "/v2/postbackconfigs/{id}/deliveries" => "postbackdeliveries",
                other => other.trim_start_matches("/v2/"),
            };
            let items = r.body[key]
                .as_array()
                .unwrap_or_else(|| panic!("{what}: no {key} array: {}", r.text));
            let total = r.body["meta"]["pagination"]["totalCount"].as_u64().unwrap();
            if *empty {
                assert!(items.is_empty(), "{what}: {}", r.text);
                assert_eq!(total, 0, "{what}: totalCount counts A's records");
            } else {
                assert!(
                    total >= 1 && !items.is_empty(),
                    "{what}: B's own records: {}",
                    r.text
                );
            }
        }
        Expect::Shared => {
            assert_eq!(r.status, 200, "{what}: body {}", r.text);
            assert_eq!(r.body["bin"]["card_brand"], "VISA", "{what}");
        }
        Expect::Own => {
            assert_eq!(r.status, 200, "{what}: body {}", r.text);
            assert_eq!(r.body["user"]["id"], b.admin, "{what}");
        }
    }
    if c.ghost_path.is_some() || c.ghost_body.is_some() {
        let path = c.ghost_path.clone().unwrap_or_else(|| c.path.clone());
        let body = if c.ghost_body.is_some() {
            &c.ghost_body
        } else {
            &c.body
        };
        let ghostly = send(&b.t, c.method, &path, body);
        assert_eq!(
            (ghostly.status, comparable(&ghostly)),
            (r.status, comparable(&r)),
            "{what}: A's record must be answered exactly like one that never existed"
        );
    }
}

/// The served (endpoint, verb) cells: every v2 path of the server's OpenAPI
/// document plus the two user routes it does not describe, each with
/// every verb.
fn cells(t: &Tenant) -> BTreeSet<(String, String)> {
    let doc = t.get("/v2/openapi.json").expect(200).body;
    let paths = doc["paths"].as_object().expect("openapi paths");
    // The boarding API (/v1) has no tenants: an application is reached by
    // its random id, an offer by an operator token (ADR 0010). Signing in
    // and out (/v2/token) touch no tenant's records; a session acts as its
    // user (tests/it/sign_in.rs). The hosted forms and tickets take no API
    // key but a user's hash-key, which signs for that user only
    // (tests/it/hosted.rs tries another tenant's key, data and tickets).
    const HASH_KEY_ROUTES: &[&str] = &["/v2/payform", "/v2/accountform", "/v2/tickets"];
    let mut templates: Vec<String> = paths
        .keys()
        .filter(|p| {
            p.starts_with("/v2/") && !p.starts_with("/v2/token") && !HASH_KEY_ROUTES.contains(&p.as_str())
        })
        .cloned()
        .collect();
    templates.push("/v2/users/me".into());
    templates.push("/v2/users/{id}/generateuserapikey".into());
    let mut out = BTreeSet::new();
    for t in templates {
        for m in ["GET", "POST", "PUT", "DELETE"] {
            out.insert((m.to_string(), t.clone()));
        }
    }
    out
}

fn cross_tenant_matrix(app: &TestApp) {
    let a = world(app, "A");
    let b = world(app, "B");
    let a_before = a.snapshot();
    let b_before = b.snapshot();
    let cases = matrix(&a, &b);

    // The matrix is exhaustive: every served endpoint with every verb.
    let covered: BTreeSet<(String, String)> = cases
        .iter()
        .map(|c| (c.method.to_string(), c.template.to_string()))
        .collect();
    let expected = cells(&b.t);
    assert_eq!(
        covered, expected,
        "the matrix must cover exactly the served endpoints x verbs"
    );
    assert_eq!(
        expected.len(),
        (21 * 2 + 29) * 4,
        "21 resources (collection and item) plus users/me, generateuserapikey, generateemulatorkey, bins, \
         accountvaultupdates, a vault's bininfo, a transaction's bininfo, override and achupdate, the ACH status \
         simulator, settle, the test clock and its advance, a postback config's deliveries and redeliver, \
         the four recurring actions, the three quick invoice actions and its files, router transactions and \
         account vaults, a terminal's online check (two spellings) and cancel, 4 verbs each"
    );
    // The verbs the matrix expects to be served agree with the OpenAPI document.
    let doc = b.t.get("/v2/openapi.json").body;
    for c in &cases {
        if let Some(ops) = doc["paths"][c.template].as_object() {
            let documented = ops.contains_key(&c.method.to_lowercase());
            let expects_405 = matches!(c.expect, Expect::Error(405));
            assert_eq!(
                documented, !expects_405,
                "{} {}: documented {documented}, matrix expects 405: {expects_405}",
                c.method, c.template
            );
        }
    }
    assert!(cases.len() > 300, "{} cases", cases.len());

    let secrets = a.secrets();
    for c in &cases {
        run_case(&b, &secrets, c);
    }

    // Nothing of A changed, nothing was created on either side.
    assert_eq!(
        a.snapshot(),
        a_before,
        "tenant A's records and lists are unchanged"
    );
    assert_eq!(
        b.snapshot(),
        b_before,
        "tenant B's records and lists are unchanged"
    );
    // Neither clock moved (B tried to move A's).
    for w in [&a, &b] {
        assert_eq!(
            w.t.get("/v2/developer/testclock").expect(200).body["testclock"]["offset_seconds"],
            0
        );
    }
    // A's keys still work (B tried to rotate them and to disable A's users).
    let a_extra = a.t.as_user(&a.extra_user, &a.extra_key);
    assert_eq!(
        a_extra.get("/v2/users/me").expect(200).body["user"]["id"],
        a.extra_user
    );
    a.t.get("/v2/contacts").expect(200);
    // A's delivery was redeliverable all along: B's 404 was the scope, not
    // the delivery's status.
    let r =
        a.t.post(
            &format!("/v2/postbackdeliveries/{}/redeliver", a.delivery),
            json!({}),
        )
        .expect(200);
    assert_eq!(r.body["postbackdelivery"]["id"], a.delivery, "{}", r.text);
    assert_eq!(r.body["postbackdelivery"]["status"], "pending", "{}", r.text);
    // A change of A's is delivered to A's subscription only (the delivery
    // row is written with the change), never to B's.
    let b_log = |t: &Tenant| {
        t.get("/v2/postbackdeliveries?page_size=100").expect(200).body["postbackdeliveries"].clone()
    };
    let b_deliveries = b_log(&b.t);
    let fresh = id_of(
        &a.t.post(
            "/v2/contacts",
            json!({ "contact": { "location_id": a.loc, "last_name": "A later" } }),
        )
        .expect(201),
        "contact",
    );
    let theirs =
        a.t.get(&format!("/v2/postbackdeliveries?record_id={fresh}"))
            .expect(200);
    assert_eq!(
        theirs.body["postbackdeliveries"][0]["postback_config_id"], a.hook,
        "{}",
        theirs.text
    );
    assert_eq!(b_log(&b.t), b_deliveries, "B's subscription gets nothing of A's");
}

/// Api id addressing and update_if_exists with an api id A also uses.
fn cross_tenant_api_id_and_upsert(app: &TestApp) {
    let a = world(app, "A");
    let b = world(app, "B");
    let a_before = a.snapshot();
    let secrets = a.secrets();
    let api = &a.contact_api_id;
    let mut cases = Vec::new();
    for method in ["GET", "PUT", "DELETE"] {
        let body = (method == "PUT").then(|| json!({ "contact": { "first_name": "Mallory" } }));
        // A's location named explicitly: not B's to address.
        cases.push(Case {
            method,
            template: "/v2/contacts/{id}",
            path: format!("/v2/contacts/{api}?api_id=1&location_id={}", a.loc),
            ghost_path: Some(format!("/v2/contacts/{api}?api_id=1&location_id={}", ghost())),
            body: body.clone(),
            ghost_body: None,
            expect: Expect::Hidden("location_id"),
        });
        // B's own location (the default) holds no such api id.
        cases.push(Case {
            method,
            template: "/v2/contacts/{id}",
            path: format!("/v2/contacts/{api}?api_id=1"),
            ghost_path: Some(format!("/v2/contacts/{}?api_id=1", ghost())),
            body,
            ghost_body: None,
            expect: Expect::Error(404),
        });
    }
    for c in &cases {
        run_case(&b, &secrets, c);
    }
    assert_eq!(a.snapshot(), a_before);

    // The same api id at B's own location is a new contact of B's, and an
    // upsert with it never reaches A's contact.
    let mine = b
        .t
        .post(
            "/v2/contacts",
            json!({ "contact": { "location_id": b.loc, "last_name": "B", "contact_api_id": api, "update_if_exists": 1 } }),
        )
        .expect(201);
    let mine_id = id_of(&mine, "contact");
    assert_ne!(mine_id, a.contact);
    let again = b
        .t
        .post(
            "/v2/contacts",
            json!({ "contact": { "location_id": b.loc, "last_name": "B2", "contact_api_id": api, "update_if_exists": 1 } }),
        )
        .expect(200);
    assert_eq!(id_of(&again, "contact"), mine_id);
    let by_api = b.t.get(&format!("/v2/contacts/{api}?api_id=1")).expect(200);
    assert_eq!(id_of(&by_api, "contact"), mine_id);
    assert_eq!(a.snapshot(), a_before, "tenant A is untouched by B's upserts");
    let theirs = a.t.get(&format!("/v2/contacts/{api}?api_id=1")).expect(200);
    assert_eq!(id_of(&theirs, "contact"), a.contact);
}

fn ids(resp: &Resp, key: &str) -> BTreeSet<String> {
    resp.body[key]
        .as_array()
        .unwrap_or_else(|| panic!("no {key} array: {}", resp.text))
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect()
}

fn set(items: &[&String]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// Parent P with children C1 (holding grandchild G) and C2. A user at C1
/// sees C1 and G, never P or C2; P's admin sees everything below it.
fn hierarchy_child_sees_its_subtree_only(app: &TestApp) {
    let t = app.bootstrap();
    let p = t.location_id();
    let c1 = t.location(&p, "C1");
    let g = t.location(&c1, "G");
    let c2 = t.location(&p, "C2");
    let mut contact = BTreeMap::new();
    let mut note = BTreeMap::new();
    for (name, loc) in [("P", &p), ("C1", &c1), ("G", &g), ("C2", &c2)] {
        let c = t.contact(json!({ "location_id": loc, "last_name": name }))["id"]
            .as_str()
            .unwrap()
            .to_string();
        let n = id_of(
            &t.post(
                "/v2/notes",
                json!({ "note": { "resource": "Contact", "resource_id": c, "note": name } }),
            )
            .expect(201),
            "note",
        );
        contact.insert(name, c);
        note.insert(name, n);
    }
    let (u1, k1) = t.user(&c1, Some("132"));
    let (u2, k2) = t.user(&c2, Some("132"));
    let child = t.as_user(&u1, &k1);
    let sibling = t.as_user(&u2, &k2);
    let admin = t.user_id();

    // By id: the subtree answers, everything else is 404 like a ghost.
    for (template, id, visible) in [
        ("/v2/locations/{id}", &c1, true),
        ("/v2/locations/{id}", &g, true),
        ("/v2/locations/{id}", &p, false),
        ("/v2/locations/{id}", &c2, false),
        ("/v2/locationinfos/{id}", &c1, true),
        ("/v2/locationinfos/{id}", &g, true),
        ("/v2/locationinfos/{id}", &p, false),
        ("/v2/locationinfos/{id}", &c2, false),
        ("/v2/contacts/{id}", &contact["C1"], true),
        ("/v2/contacts/{id}", &contact["G"], true),
        ("/v2/contacts/{id}", &contact["P"], false),
        ("/v2/contacts/{id}", &contact["C2"], false),
        ("/v2/notes/{id}", &note["G"], true),
        ("/v2/notes/{id}", &note["P"], false),
        ("/v2/notes/{id}", &note["C2"], false),
        ("/v2/users/{id}", &u1, true),
        ("/v2/users/{id}", &admin, false),
        ("/v2/users/{id}", &u2, false),
    ] {
        let path = template.replace("{id}", id);
        let r = child.get(&path);
        if visible {
            let r = r.expect(200);
            assert_eq!(
                r.body.as_object().unwrap().values().next().unwrap()["id"],
                json!(id)
            );
        } else {
            let ghostly = child.get(&template.replace("{id}", &ghost()));
            assert_eq!(r.status, 404, "GET {path} as the C1 user: {}", r.text);
            assert_eq!(comparable(&r), comparable(&ghostly), "GET {path}: like a ghost");
        }
    }
    // Nor can it change or delete what lies outside.
    for (path, body) in [
        (
            format!("/v2/contacts/{}", contact["P"]),
            json!({ "contact": { "first_name": "x" } }),
        ),
        (
            format!("/v2/contacts/{}", contact["C2"]),
            json!({ "contact": { "first_name": "x" } }),
        ),
        (
            format!("/v2/locations/{p}"),
            json!({ "location": { "name": "x", "parent_id": c1 } }),
        ),
        (
            format!("/v2/locations/{c2}"),
            json!({ "location": { "name": "x", "parent_id": c1 } }),
        ),
        (
            format!("/v2/notes/{}", note["P"]),
            json!({ "note": { "note": "x" } }),
        ),
        (format!("/v2/users/{admin}"), json!({ "user": { "status": 0 } })),
    ] {
        child.put(&path, body).expect(404);
        child.delete(&path).expect(404);
    }
    child
        .post(&format!("/v2/users/{admin}/generateuserapikey"), json!({}))
        .expect(404);

    // Lists hold exactly the subtree.
    let page = "page_size=100";
    assert_eq!(
        ids(
            &child.get(&format!("/v2/contacts?{page}")).expect(200),
            "contacts"
        ),
        set(&[&contact["C1"], &contact["G"]])
    );
    assert_eq!(
        ids(
            &child.get(&format!("/v2/locations?{page}")).expect(200),
            "locations"
        ),
        set(&[&c1, &g])
    );
    assert_eq!(
        ids(&child.get(&format!("/v2/notes?{page}")).expect(200), "notes"),
        set(&[&note["C1"], &note["G"]])
    );
    assert_eq!(
        ids(&child.get(&format!("/v2/users?{page}")).expect(200), "users"),
        set(&[&u1])
    );
    let arus = child.get(&format!("/v2/authroleusers?{page}")).expect(200);
    assert!(arus.body["authroleusers"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["user_id"] == json!(u1)));
    for (rel, want) in [
        ("all", set(&[&c1, &g])),
        ("direct", set(&[&c1])),
        ("child", set(&[&g])),
    ] {
        let r = child
            .get(&format!("/v2/locationinfos?relationship={rel}&{page}"))
            .expect(200);
        assert_eq!(ids(&r, "locationinfos"), want, "relationship={rel}");
    }
    for path in [
        format!("/v2/contacts?location_id={p}"),
        format!("/v2/contacts?location_id={c2}"),
        format!("/v2/locations?id={p}"),
        format!("/v2/locations?parent_id={c2}"),
        format!("/v2/notes?resource_id={}", contact["P"]),
        format!("/v2/users?id={admin}"),
        format!("/v2/users?primary_location_id={c2}"),
        format!("/v2/authroleusers?user_id={admin}"),
        format!("/v2/locationinfos?relationship=all&id={p}"),
    ] {
        let r = child.get(&path).expect(200);
        assert_eq!(
            r.body["meta"]["pagination"]["totalCount"], 0,
            "GET {path}: {}",
            r.text
        );
    }

    // Pointing outside the subtree is refused; inside it works.
    for (path, body, field) in [
        (
            "/v2/contacts",
            json!({ "contact": { "location_id": p, "last_name": "x" } }),
            "location_id",
        ),
        (
            "/v2/contacts",
            json!({ "contact": { "location_id": c2, "last_name": "x" } }),
            "location_id",
        ),
        (
            "/v2/locations",
            json!({ "location": { "parent_id": p, "name": "x", "branding_domain_url": "x.example.com" } }),
            "parent_id",
        ),
        (
            "/v2/users",
            json!({ "user": { "primary_location_id": p, "username": format!("u{}", ghost()) } }),
            "primary_location_id",
        ),
        (
            "/v2/notes",
            json!({ "note": { "resource": "Contact", "resource_id": contact["P"], "note": "x" } }),
            "resource_id",
        ),
        (
            "/v2/authroleusers",
            json!({ "authroleuser": { "user_id": u2, "auth_role_id": "2" } }),
            "user_id",
        ),
    ] {
        let r = child.post(path, body).expect(422);
        assert!(!r.errors(field).is_empty(), "POST {path}: {}", r.text);
    }
    // Moving a location of the subtree outside it, or its own location.
    let r = child
        .put(
            &format!("/v2/locations/{g}"),
            json!({ "location": { "name": "G", "parent_id": c2 } }),
        )
        .expect(422);
    assert!(!r.errors("parent_id").is_empty());
    let r = child
        .put(
            &format!("/v2/locations/{c1}"),
            json!({ "location": { "name": "C1", "parent_id": c2 } }),
        )
        .expect(422);
    assert!(!r.errors("parent_id").is_empty());
    let at_g = id_of(
        &child
            .post(
                "/v2/contacts",
                json!({ "contact": { "location_id": g, "last_name": "made by C1" } }),
            )
            .expect(201),
        "contact",
    );
    let below_g = child.location(&g, "below G");

    // The parent's admin sees the child's records and can change them.
    t.get(&format!("/v2/contacts/{at_g}")).expect(200);
    t.get(&format!("/v2/locations/{below_g}")).expect(200);
    t.get(&format!("/v2/users/{u1}")).expect(200);
    t.put(
        &format!("/v2/contacts/{}", contact["G"]),
        json!({ "contact": { "first_name": "edited by P" } }),
    )
    .expect(200);
    let all_contacts = ids(&t.get(&format!("/v2/contacts?{page}")).expect(200), "contacts");
    for c in contact.values().chain([&at_g]) {
        assert!(all_contacts.contains(c), "P's admin lists {c}");
    }
    let all_locations = ids(&t.get(&format!("/v2/locations?{page}")).expect(200), "locations");
    assert_eq!(all_locations, set(&[&p, &c1, &g, &c2, &below_g]));
    let all_users = ids(&t.get(&format!("/v2/users?{page}")).expect(200), "users");
    assert_eq!(all_users, set(&[&admin, &u1, &u2]));
    let infos = t
        .get(&format!("/v2/locationinfos?relationship=all&{page}"))
        .expect(200);
    assert_eq!(ids(&infos, "locationinfos"), set(&[&p, &c1, &g, &c2, &below_g]));

    // The sibling sees neither C1 nor what lies below it.
    for path in [
        format!("/v2/locations/{c1}"),
        format!("/v2/locations/{g}"),
        format!("/v2/locations/{below_g}"),
        format!("/v2/contacts/{at_g}"),
        format!("/v2/contacts/{}", contact["C1"]),
        format!("/v2/users/{u1}"),
    ] {
        sibling.get(&path).expect(404);
    }
    assert_eq!(
        ids(
            &sibling.get(&format!("/v2/contacts?{page}")).expect(200),
            "contacts"
        ),
        set(&[&contact["C2"]])
    );
    assert_eq!(
        ids(
            &sibling.get(&format!("/v2/locations?{page}")).expect(200),
            "locations"
        ),
        set(&[&c2])
    );

    // Nor do embeds reach outside: the parent location and the parent's
    // admin (who created the C1 records) stay hidden.
    let admin_name = t.get("/v2/users/me").expect(200).body["user"]["username"]
        .as_str()
        .unwrap()
        .to_string();
    let r = child
        .get(&format!(
            "/v2/locations/{c1}?expand=parent,created_user,changelogs"
        ))
        .expect(200);
    assert_eq!(r.body["location"]["parent"], Value::Null, "{}", r.text);
    assert_eq!(r.body["location"]["created_user"], Value::Null, "{}", r.text);
    let r = child
        .get(&format!(
            "/v2/contacts/{}?expand=created_user,changelogs,notes,location",
            contact["C1"]
        ))
        .expect(200);
    assert_eq!(r.body["contact"]["created_user"], Value::Null, "{}", r.text);
    let mut leaks = Vec::new();
    for path in [
        format!("/v2/locations/{c1}?expand=changelogs"),
        format!("/v2/contacts/{}?expand=changelogs", contact["C1"]),
        format!("/v2/notes/{}?expand=changelogs,created_user", note["C1"]),
        format!("/v2/users/{u1}?expand=changelogs,created_user"),
        "/v2/authroleusers?expand=user,created_user".to_string(),
    ] {
        let r = child.get(&path).expect(200);
        if r.text.contains(&admin_name) {
            leaks.push(format!("GET {path}: {}", r.text));
        }
    }
    assert!(
        leaks.is_empty(),
        "the C1 user is shown the parent's admin {admin_name}:\n{}",
        leaks.join("\n")
    );
}

/// A parent location's user sees its children's records, but a record
/// kept at one location cannot name another location's contact, vault
/// or transaction: a child's invoice or vault would show a sibling's
/// customer to the child's users, and a refund made elsewhere than its
/// sale escapes the sale's location. A refund without a location is made
/// at its sale's.
fn references_stay_at_their_location(app: &TestApp) {
    let t = app.bootstrap();
    let own = t.location_id();
    let c1 = t.location(&own, "C1");
    let c2 = t.location(&own, "C2");
    let sibling_contact = t.contact(json!({ "location_id": c2, "email": "sib@example.com" }))["id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = t.post(
        "/v2/quickinvoices",
        json!({ "quickinvoice": { "location_id": c1, "title": "x", "due_date": "2030-01-15",
            "item_list": { "a": "1.00" }, "contact_id": sibling_contact,
            "cc_product_transaction_id": t.cred("cc_product_transaction_id") } }),
    );
    assert_eq!(r.status, 422, "{}", r.text);
    let r = t.post(
        "/v2/accountvaults",
        json!({ "accountvault": { "location_id": c1, "payment_method": "cc", "contact_id": sibling_contact,
            "account_number": "4111111111111111", "exp_date": "1239" } }),
    );
    assert_eq!(r.status, 422, "{}", r.text);
    assert!(!r.errors("contact_id").is_empty(), "{}", r.text);

    let pt = crate::locations::insert_product_transaction(app, &c1, "cc");
    let sale = t
        .post(
            "/v2/transactions",
            json!({ "transaction": { "action": "sale", "payment_method": "cc", "location_id": c1,
                "product_transaction_id": pt, "account_number": "4111111111111111",
                "exp_date": "1239", "transaction_amount": "9.00" } }),
        )
        .expect(201);
    let sale_id = sale.body["transaction"]["id"].as_str().unwrap().to_string();
    let batch = sale.body["transaction"]["transaction_batch_id"]
        .as_str()
        .unwrap()
        .to_string();
    t.post(&format!("/v2/transactionbatches/{batch}/settle"), json!({}))
        .expect(200);
    let r = t.post(
        "/v2/transactions",
        json!({ "transaction": { "action": "sale", "payment_method": "cc", "location_id": c1,
            "product_transaction_id": pt, "contact_id": sibling_contact, "account_number": "4111111111111111",
            "exp_date": "1239", "transaction_amount": "3.00" } }),
    );
    assert_eq!(r.status, 422, "{}", r.text);
    assert!(!r.errors("contact_id").is_empty(), "{}", r.text);
    let refund = |extra: Value| {
        let mut tx = json!({ "action": "refund", "payment_method": "cc",
            "previous_transaction_id": sale_id, "transaction_amount": "4.00" });
        for (k, v) in extra.as_object().unwrap() {
            tx[k] = v.clone();
        }
        t.post("/v2/transactions", json!({ "transaction": tx }))
    };
    let r = refund(json!({ "location_id": own }));
    assert_eq!(r.status, 422, "{}", r.text);
    assert!(!r.errors("previous_transaction_id").is_empty(), "{}", r.text);
    let r = refund(json!({ "product_transaction_id": pt })).expect(201);
    assert_eq!(r.body["transaction"]["location_id"], c1.as_str());
    assert_eq!(r.body["transaction"]["product_transaction_id"], pt.as_str());
}
