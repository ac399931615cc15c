//! `GET /v2/bins/{bin}`: brand, PAN length and issuer data of a 6 to 8
//! digit BIN. Reference data shared by every tenant; any user with a role
//! (permission `bins.read`) may read it.

use super::extract::{query_pairs, IdPath};
use super::AppState;
use crate::auth::Caller;
use crate::bins;
use crate::engine::validate;
use crate::error::{ApiError, ApiResult, FieldErrors};
use axum::extract::{RawQuery, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::json;

pub const PERMISSION: &str = "bins.read";

pub fn routes() -> Router<AppState> {
    Router::new().route("/v2/bins/{bin}", get(read))
}

async fn read(
    State(app): State<AppState>,
    caller: Caller,
    IdPath(bin): IdPath,
    RawQuery(q): RawQuery,
) -> ApiResult<Response> {
    caller.perms.require(PERMISSION)?;
    let mut errors = FieldErrors::new();
    for (k, _) in query_pairs(q.as_deref()) {
        if !matches!(k.as_str(), "developer-id" | "user-id" | "user-api-key") {
            let k = validate::echo_name(&k);
            errors.add(k.clone(), format!("Unknown parameter '{k}'."));
        }
    }
    if !bins::is_bin(&bin) {
        errors.add("bin", bins::BIN_MESSAGE);
    }
    errors.into_result()?;
    let found = app.store.read(move |conn| Ok(bins::lookup(conn, &bin)?)).await?;
    if !found.is_known() {
        return Err(ApiError::NotFound(
            "No card brand or issuer is known for this BIN.".into(),
        ));
    }
    Ok(Json(json!({ "bin": found.bin_json() })).into_response())
}
