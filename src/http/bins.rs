//! `GET /v2/bins/{bin}`: brand, PAN length and issuer data of a 6 to 8
//! digit BIN. Reference data shared by every tenant; any user with a role
//! (permission `bins.read`) may read it.

use super::extract::{query_pairs, IdPath};
use super::AppState;
use crate::auth::Caller;
use crate::bins;
use crate::db::Conn;
use crate::engine::record::Record;
use crate::engine::validate;
use crate::engine::Cx;
use crate::error::{ApiError, ApiResult, FieldErrors};
use crate::resources::ACCOUNT_VAULT;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, RawQuery, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::json;

pub const PERMISSION: &str = "bins.read";

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v2/bins/{bin}", get(read))
        .route("/v2/accountvaults/{id}/bininfo", get(vault_bininfo))
}

/// `GET /v2/accountvaults/{id}/bininfo`: the issuer facts of a card vault,
/// looked up by its first eight digits (opened in memory, never returned).
async fn vault_bininfo(
    State(app): State<AppState>,
    caller: Caller,
    IdPath(id): IdPath,
    RawQuery(q): RawQuery,
) -> ApiResult<Response> {
    caller.perms.require(&ACCOUNT_VAULT.permission("read"))?;
    // `?api_id=1[&location_id=]` names the vault by account_vault_api_id;
    // the parameters of any record path, checked as there (no expand).
    let pairs = query_pairs(q.as_deref());
    super::crud::item_params(&ACCOUNT_VAULT, &pairs, false)?;
    let address = super::crud::address(&ACCOUNT_VAULT, id, &pairs, &caller)?;
    let cx = app.cx(&caller);
    let info = app
        .store
        .read(move |conn| {
            let vault = super::crud::locate(conn, &cx, &ACCOUNT_VAULT, &address)?;
            if vault.text("payment_method") != Some("cc") {
                return Err(ApiError::field(
                    "payment_method",
                    "BIN information exists for cc vaults only.",
                ));
            }
            let mut info = card_bininfo(&cx, conn, &vault)?;
            with_self_link(
                &mut info,
                cx.href(&format!("/v2/accountvaults/{}/bininfo", vault.id())),
            );
            Ok(info)
        })
        .await?;
    Ok(Json(json!({ "bininfo": info })).into_response())
}

/// `_links.self.href`, which every answered record carries.
fn with_self_link(record: &mut serde_json::Value, href: String) {
    if let Some(map) = record.as_object_mut() {
        map.insert("_links".into(), json!({ "self": { "href": href } }));
    }
}

/// The bininfo of a record holding a sealed card number (a vault, a
/// transaction): looked up by its first eight digits, opened in memory
/// and never returned; `first_six` if the number cannot be opened.
pub fn card_bininfo(cx: &Cx, conn: &mut dyn Conn, record: &Record) -> ApiResult<serde_json::Value> {
    let bin = match record.text("account_number").map(|s| cx.keyring.decrypt(s)) {
        Some(Ok(pan)) => pan.chars().take(8).collect::<String>(),
        _ => record.text("first_six").unwrap_or_default().to_string(),
    };
    bins::bininfo(conn, &bin)
}

async fn read(
    State(app): State<AppState>,
    caller: Caller,
    bin: Result<Path<String>, PathRejection>,
    RawQuery(q): RawQuery,
) -> ApiResult<Response> {
    caller.perms.require(PERMISSION)?;
    // A path that does not decode (not UTF-8) is no BIN either: the 422
    // below, not a 404.
    let bin = bin.map(|Path(b)| b).unwrap_or_default();
    let mut errors = FieldErrors::new();
    for (k, _) in query_pairs(q.as_deref()) {
        if !crate::engine::query::CREDENTIAL_PARAMS.contains(&k.as_str()) {
            let k = validate::echo_name(&k);
            errors.add(k.clone(), format!("Unknown parameter '{k}'."));
        }
    }
    if !bins::is_bin(&bin) {
        errors.add("bin", bins::BIN_MESSAGE);
    }
    errors.into_result()?;
    let self_href = app.cx(&caller).href(&format!("/v2/bins/{bin}"));
    let found = app.store.read(move |conn| Ok(bins::lookup(conn, &bin)?)).await?;
    if !found.is_known() {
        return Err(ApiError::NotFound(
            "No card brand or issuer is known for this BIN.".into(),
        ));
    }
    let mut bin = found.bin_json();
    with_self_link(&mut bin, self_href);
    Ok(Json(json!({ "bin": bin })).into_response())
}
