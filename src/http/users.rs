//! Users: the generic resource routes plus `me` and API key generation.

use super::crud::{self, one};
use super::extract::IdPath;
use super::AppState;
use crate::auth::Caller;
use crate::crypto::{hash_api_key, random_secret};
use crate::engine::{self, query};
use crate::error::{ApiError, ApiResult};
use crate::resources::USER;
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use serde_json::json;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v2/users/me", get(me))
        .route("/v2/users/{id}/generateuserapikey", post(generate_api_key))
        .route("/v2/users/{id}/generateemulatorkey", post(generate_emulator_key))
        .merge(crud::routes(&USER, crud::ALL))
}

/// `POST /v2/users/{id}/generateemulatorkey`: a login (20 characters) and
/// transaction key (16) for Authorize.Net integrations, whose schema caps
/// those at 25 and 16; shown once, replacing the user's earlier pair. The
/// same rules as a new API key.
async fn generate_emulator_key(
    State(app): State<AppState>,
    caller: Caller,
    IdPath(id): IdPath,
) -> ApiResult<Response> {
    require_some_role(&caller)?;
    if id != caller.user_id {
        caller.perms.require(&USER.permission("update"))?;
    }
    let cx = app.cx(&caller);
    let login = random_secret(crate::emulator::credentials::LOGIN_LEN);
    let key = random_secret(crate::emulator::credentials::KEY_LEN);
    let digest = hash_api_key(&key);
    let stored_login = login.clone();
    app.store
        .write(move |conn| crate::emulator::credentials::replace(&cx, conn, &id, &stored_login, &digest))
        .await?;
    Ok(one(
        &USER,
        StatusCode::OK,
        json!({ "emulator_login": login, "emulator_transaction_key": key }),
    ))
}

/// A user has no permission at all until a role is attached, not even on
/// its own record.
fn require_some_role(caller: &Caller) -> ApiResult<()> {
    if caller.perms.has_some() {
        Ok(())
    } else {
        Err(ApiError::Forbidden(
            "The user has no role yet: attach one through authroleusers.".into(),
        ))
    }
}

/// The caller's own user record (any role will do).
/// `GET /v2/users/me`: the caller's own record, with the expands and
/// parameter checks of `GET /v2/users/{id}`.
async fn me(State(app): State<AppState>, caller: Caller, RawQuery(q): RawQuery) -> ApiResult<Response> {
    require_some_role(&caller)?;
    let pairs = super::extract::query_pairs(q.as_deref());
    let expand = crud::item_params(&USER, &pairs, true)?;
    let cx = app.cx(&caller);
    let body = app
        .store
        .read(move |conn| {
            let record = query::find(conn, &USER, &cx.scope, &cx.user_id)?
                .ok_or_else(|| ApiError::not_found("user"))?;
            engine::render_read(&cx, conn, &record, &[], &expand)
        })
        .await?;
    Ok(one(&USER, StatusCode::OK, body))
}

/// Issues a new API key for a user; the old one stops working at once.
/// The key is shown this once and never again.
async fn generate_api_key(
    State(app): State<AppState>,
    caller: Caller,
    IdPath(id): IdPath,
) -> ApiResult<Response> {
    require_some_role(&caller)?;
    if id != caller.user_id {
        caller.perms.require(&USER.permission("update"))?;
    }
    let cx = app.cx(&caller);
    let key = random_secret(40);
    let digest = hash_api_key(&key);
    app.store
        .write(move |conn| crate::resources::users::replace_api_key(&cx, conn, &id, digest))
        .await?;
    Ok(one(&USER, StatusCode::OK, json!({ "user_api_key": key })))
}
