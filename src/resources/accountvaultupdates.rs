//! Account vault updates: subscribe card vaults to (or unsubscribe them
//! from) the card account updater, by vault ids and/or by the product
//! transactions whose vaults they are. Only cc vaults are affected.

use super::{ACCOUNT_VAULT, PRODUCT_TRANSACTION};
use crate::db::{Conn, Value};
use crate::engine::record::Record;
use crate::engine::{query, update_record, Cx};
use crate::error::{ApiError, ApiResult, FieldErrors};
use serde_json::{json, Map, Value as Json};

pub const ACTIONS: &[&str] = &[
    "subscribe_all",
    "subscribe_recurring_only",
    "unsubscribe_all",
    "unsubscribe_non_recurring",
];

/// Most vaults one request may change (one transaction holds them all).
const MAX_TARGETS: usize = 5000;

/// Most ids one request may name.
const MAX_IDS: usize = 1000;

/// A validated request.
pub struct Request {
    pub action: String,
    pub account_vault_ids: Vec<String>,
    pub product_transaction_ids: Vec<String>,
}

fn id_list(body: &Map<String, Json>, key: &str, errors: &mut FieldErrors) -> Vec<String> {
    let values = match body.get(key) {
        None | Some(Json::Null) => return Vec::new(),
        Some(Json::String(s)) => vec![Json::String(s.clone())],
        Some(Json::Array(a)) => a.clone(),
        Some(_) => {
            errors.add(key, format!("{key} must be an array of ids."));
            return Vec::new();
        }
    };
    if values.len() > MAX_IDS {
        errors.add(key, format!("At most {MAX_IDS} ids."));
        return Vec::new();
    }
    let mut out = Vec::new();
    for v in values {
        match v.as_str() {
            Some(s) if crate::ids::looks_like_id(s) => {
                if !out.iter().any(|o| o == s) {
                    out.push(s.to_string())
                }
            }
            _ => errors.add(key, format!("{key} provided is not valid")),
        }
    }
    out
}

pub fn parse(body: &Map<String, Json>) -> ApiResult<Request> {
    let mut errors = FieldErrors::new();
    for key in body.keys() {
        if !matches!(
            key.as_str(),
            "action" | "account_vault_id" | "product_transaction_id"
        ) {
            let k = crate::engine::validate::echo_name(key);
            errors.add(k.clone(), format!("Unknown field {k} for accountvaultupdate."));
        }
    }
    let action = match body.get("action") {
        None | Some(Json::Null) => "subscribe_all".to_string(),
        Some(Json::String(a)) if ACTIONS.contains(&a.as_str()) => a.clone(),
        Some(_) => {
            errors.add("action", format!("Action must be one of {}.", ACTIONS.join(", ")));
            String::new()
        }
    };
    let account_vault_ids = id_list(body, "account_vault_id", &mut errors);
    let product_transaction_ids = id_list(body, "product_transaction_id", &mut errors);
    if errors.is_empty() && account_vault_ids.is_empty() && product_transaction_ids.is_empty() {
        errors.add(
            "account_vault_id",
            "Send at least one account_vault_id or product_transaction_id.",
        );
    }
    errors.into_result()?;
    Ok(Request {
        action,
        account_vault_ids,
        product_transaction_ids,
    })
}

/// Applies the request in one transaction; reports what changed.
pub fn apply(cx: &Cx, conn: &mut dyn Conn, req: &Request) -> ApiResult<Json> {
    let mut errors = FieldErrors::new();
    let mut targets: Vec<Record> = Vec::new();
    // Errors name the position, not the id: ids outside the caller's scope
    // are answered like ids that never existed.
    for (i, id) in req.account_vault_ids.iter().enumerate() {
        match query::find(conn, &ACCOUNT_VAULT, &cx.scope, id)? {
            Some(v) => targets.push(v),
            None => errors.add(
                "account_vault_id",
                format!("account_vault_id[{i}] provided is not valid"),
            ),
        }
    }
    for (i, id) in req.product_transaction_ids.iter().enumerate() {
        let Some(pt) = query::find(conn, &PRODUCT_TRANSACTION, &cx.scope, id)? else {
            errors.add(
                "product_transaction_id",
                format!("product_transaction_id[{i}] provided is not valid"),
            );
            continue;
        };
        // A product transaction's vaults: those of its location and method.
        let mut sql = query::select(&ACCOUNT_VAULT, &cx.scope);
        sql.push(" AND t.location_id = ")
            .bind(pt.text("location_id").unwrap_or_default().to_string())
            .push(" AND t.payment_method = ")
            .bind(pt.text("payment_method").unwrap_or_default().to_string())
            .push(" ORDER BY t.id");
        for row in conn.query(&sql)? {
            let v = Record::from_row(&ACCOUNT_VAULT, row);
            if !targets.iter().any(|t| t.id() == v.id()) {
                targets.push(v);
            }
        }
    }
    if targets.len() > MAX_TARGETS {
        errors.add(
            "product_transaction_id",
            format!(
                "These select {} vaults; at most {MAX_TARGETS} at once: name vaults with account_vault_id.",
                targets.len()
            ),
        );
    }
    errors.into_result()?;

    let subscribe = req.action.starts_with("subscribe");
    let mut changed = Vec::new();
    let mut unchanged = Vec::new();
    let mut ignored_ach = Vec::new();
    let mut not_applicable = Vec::new();
    let subscribed = ACCOUNT_VAULT
        .field("cau_subscribed")
        .ok_or_else(|| ApiError::internal("field"))?;
    let since = ACCOUNT_VAULT
        .field("cau_subscribed_ts")
        .ok_or_else(|| ApiError::internal("field"))?;
    for vault in targets {
        let id = vault.id().to_string();
        if vault.text("payment_method") != Some("cc") {
            ignored_ach.push(id);
            continue;
        }
        let recurring = vault.int("has_recurring") == Some(1);
        let applies = match req.action.as_str() {
            "subscribe_recurring_only" => recurring,
            "unsubscribe_non_recurring" => !recurring,
            _ => true,
        };
        if !applies {
            not_applicable.push(id);
            continue;
        }
        if (vault.int("cau_subscribed") == Some(1)) == subscribe {
            unchanged.push(id);
            continue;
        }
        let changes = vec![
            (subscribed, Value::Int(subscribe as i64)),
            (
                since,
                if subscribe {
                    Value::Int(cx.now)
                } else {
                    Value::Null
                },
            ),
        ];
        update_record(cx, conn, vault, crate::engine::validate::UpdateInput::of(changes))?;
        changed.push(id);
    }
    Ok(json!({
        "action": req.action,
        "account_vault_id": req.account_vault_ids,
        "product_transaction_id": req.product_transaction_ids,
        "subscribed": subscribe,
        "changed": changed,
        "unchanged": unchanged,
        "not_applicable": not_applicable,
        "ignored_ach": ignored_ach,
    }))
}
