//! `ferrogate bootstrap`: a new merchant location below the root with a
//! cc and an ach product transaction, a developer and an admin user.

use crate::crypto::{hash_api_key, random_secret, Keyring};
use crate::db::{Conn, Sql, Store, Value};
use crate::engine::events::{self, Action};
use crate::engine::query::TenantScope;
use crate::engine::record::Record;
use crate::engine::{insert, Cx};
use crate::error::ApiResult;
use crate::ids::{new_id, ROOT_LOCATION_ID};
use crate::resources::product_transactions::default_settings;
use crate::resources::{LOCATION, PRODUCT_TRANSACTION, USER};
use serde::Serialize;
use std::sync::Arc;

#[derive(Serialize, Debug, Clone)]
pub struct Credentials {
    pub developer_id: String,
    pub user_id: String,
    pub user_api_key: String,
    pub user_hash_key: String,
    pub location_id: String,
    pub cc_product_transaction_id: String,
    pub ach_product_transaction_id: String,
}

fn ensure_root(conn: &mut dyn Conn, now: i64) -> ApiResult<()> {
    conn.execute(&Sql::with(
        "INSERT INTO locations (id, path, parent_id, name, contact_email_trx_receipt_default, show_contact_notes, show_contact_files, created_ts, modified_ts) VALUES (?, ?, NULL, ?, 0, 0, 0, ?, ?) ON CONFLICT (id) DO NOTHING",
        vec![
            ROOT_LOCATION_ID.into(),
            format!("/{ROOT_LOCATION_ID}/").into(),
            "Root".into(),
            now.into(),
            now.into(),
        ],
    ))?;
    Ok(())
}

pub fn run(store: &Store, keyring: Arc<Keyring>, name: Option<String>, now: i64) -> ApiResult<Credentials> {
    store.write_blocking(move |conn| create_tenant(conn, &keyring, name, now))
}

/// The tenant of [`run`], made inside the caller's transaction (boarding
/// makes its merchant with it).
pub fn create_tenant(
    conn: &mut dyn Conn,
    keyring: &Arc<Keyring>,
    name: Option<String>,
    now: i64,
) -> ApiResult<Credentials> {
    ensure_root(conn, now)?;
    let developer_id = new_id();
    let location_id = new_id();
    let user_id = new_id();
    let cc_id = new_id();
    let ach_id = new_id();
    let api_key = random_secret(40);
    let hash_key = random_secret(40);
    let short = &location_id[location_id.len() - 8..];
    let name = name.unwrap_or_else(|| format!("Merchant {short}"));
    let cx = Cx {
        user_id: user_id.clone(),
        scope: TenantScope {
            location_id: location_id.clone(),
            path: format!("/{ROOT_LOCATION_ID}/{location_id}/"),
            tz: chrono_tz::UTC,
            leaf: false,
        },
        now,
        outbound: Default::default(),
        keyring: keyring.clone(),
        public_url: Arc::from(""),
        perms: Arc::new(crate::auth::Perms {
            admin: true,
            ..Default::default()
        }),
        // A location being created has no postback config yet.
        sink: Arc::new(events::NoSink),
        user_receipts: None,
        epoch: None,
    };

    conn.execute(&Sql::with(
        "INSERT INTO developers (id, name, created_ts) VALUES (?, ?, ?)",
        vec![
            developer_id.clone().into(),
            format!("Developer of {name}").into(),
            now.into(),
        ],
    ))?;

    let mut location = Record::empty(&LOCATION);
    location.set("id", location_id.clone());
    location.set("parent_id", ROOT_LOCATION_ID);
    location.set("path", cx.scope.path.clone());
    location.set("name", name.clone());
    location.set("branding_domain_url", "localhost");
    crate::resources::locations::boolean_flags(&mut location);
    location.set(
        "location_api_key",
        keyring.encrypt(&uuid::Uuid::new_v4().to_string()),
    );
    location.set(
        "ticket_hash_key",
        keyring.encrypt(&uuid::Uuid::new_v4().to_string()),
    );
    location.set("tz", "UTC");
    location.set("created_ts", now);
    location.set("modified_ts", now);
    insert(conn, &location)?;

    for (id, method, title) in [
        (&cc_id, "cc", "Sandbox card account"),
        (&ach_id, "ach", "Sandbox ACH account"),
    ] {
        let mut pt = Record::empty(&PRODUCT_TRANSACTION);
        pt.set("id", id.clone());
        pt.set("location_id", location_id.clone());
        pt.set("payment_method", method);
        pt.set("processor", "sandbox");
        pt.set("title", title);
        pt.set("active", 1);
        pt.set("settings", default_settings(method).to_string());
        pt.set("created_ts", now);
        pt.set("modified_ts", now);
        insert(conn, &pt)?;
    }
    conn.execute(&Sql::with(
        "UPDATE locations SET default_cc = ?, default_ach = ? WHERE id = ?",
        vec![
            cc_id.clone().into(),
            ach_id.clone().into(),
            location_id.clone().into(),
        ],
    ))?;

    let mut user = Record::empty(&USER);
    user.set("id", user_id.clone());
    user.set("primary_location_id", location_id.clone());
    user.set("username", format!("admin-{}", &user_id[user_id.len() - 12..]));
    user.set("first_name", "Admin");
    user.set("last_name", name.clone());
    user.set("user_type_id", 300);
    user.set("status", 1);
    user.set("requires_new_password", 0);
    user.set("login_attempts", 0);
    user.set("branding_domain_url", "localhost");
    user.set("email_trx_receipt", 0);
    user.set("api_key_hash", hash_api_key(&api_key));
    user.set("hash_key_enc", keyring.encrypt(&hash_key));
    user.set("created_ts", now);
    user.set("modified_ts", now);
    insert(conn, &user)?;

    conn.execute(&Sql::with(
        "INSERT INTO auth_role_users (id, location_id, user_id, auth_role_id, created_user_id, created_ts, modified_ts) VALUES (?, ?, ?, ?, ?, ?, ?)",
        vec![
            new_id().into(),
            location_id.clone().into(),
            user_id.clone().into(),
            "1".into(),
            Value::Null,
            now.into(),
            now.into(),
        ],
    ))?;
    events::record(conn, &cx, Action::Create, &location, &[])?;
    events::record(conn, &cx, Action::Create, &user, &[])?;

    Ok(Credentials {
        developer_id,
        user_id,
        user_api_key: api_key,
        user_hash_key: hash_key,
        location_id,
        cc_product_transaction_id: cc_id,
        ach_product_transaction_id: ach_id,
    })
}
