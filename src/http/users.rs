//! Users: the generic resource routes plus `me` and API key generation.

use super::crud::{self, one};
use super::extract::{IdPath, RawBody};
use super::ratelimit::ClientAddr;
use super::AppState;
use crate::auth::Caller;
use crate::crypto::{hash_api_key, random_secret};
use crate::engine::validate::UpdateInput;
use crate::engine::{self, query};
use crate::error::{ApiError, ApiResult};
use crate::passwords::Prepared;
use crate::resources::USER;
use crate::sessions::NameLock;
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{get, post, put};
use axum::{Extension, Router};
use serde_json::json;

pub fn routes() -> Router<AppState> {
    // The generic routes, but a PUT of our own: see `update`.
    let generic = crud::Verbs {
        update: false,
        ..crud::ALL
    };
    Router::new()
        .route("/v2/users/me", get(me))
        .route("/v2/users/{id}", put(update))
        .route("/v2/users/{id}/generateuserapikey", post(generate_api_key))
        .route("/v2/users/{id}/generateemulatorkey", post(generate_emulator_key))
        .merge(crud::routes(&USER, generic))
}

/// `PUT /v2/users/{id}`: the generic update, with a new password made
/// ready first ([`prepare_password`]).
async fn update(
    State(app): State<AppState>,
    caller: Caller,
    address: Option<Extension<ClientAddr>>,
    IdPath(id): IdPath,
    RawQuery(q): RawQuery,
    RawBody(body): RawBody,
) -> ApiResult<Response> {
    let (record, mut input) = crud::update_input(&USER, &caller, id.clone(), q.as_deref(), &body)?;
    let ip = address.map(|Extension(ClientAddr(ip))| ip);
    input.password = prepare_password(&app, &caller, &id, &input, ip).await?;
    crud::save_update(&USER, &app, &caller, record, input).await
}

/// Checks `old_password` and hashes the new password before the write
/// job, where argon2 would hold the writer (ADR 0012). Changing one's own
/// password is a password check like a sign-in: refused while the user's
/// name is locked, and a wrong `old_password` counts toward that lock and
/// the address's sign-in limit, so it cannot be guessed without limit.
/// `None` leaves everything to the rules (no password, or one they will
/// refuse, or a record that is not there).
async fn prepare_password(
    app: &AppState,
    caller: &Caller,
    id: &str,
    input: &UpdateInput,
    ip: Option<std::net::IpAddr>,
) -> ApiResult<Option<Prepared>> {
    let text = |name: &str| match input.transient.get(name) {
        Some(serde_json::Value::String(s)) => Some(s.clone()),
        _ => None,
    };
    let Some(password) = text("password") else {
        return Ok(None);
    };
    if crate::passwords::check(&password, None).is_err() {
        return Ok(None);
    }
    let mut checked_against = None;
    if id == caller.user_id {
        let cx = app.cx(caller);
        let found = app
            .store
            .read(move |conn| {
                let user = query::find(conn, &USER, &cx.scope, &cx.user_id)?;
                Ok(user.map(|u| {
                    let text = |name: &str| u.text(name).map(str::to_string);
                    (text("username").unwrap_or_default(), text("password_hash"))
                }))
            })
            .await?;
        let Some((username, current)) = found else {
            return Ok(None);
        };
        if let Some(current) = current {
            let lock = NameLock::new(
                &username,
                Some(caller.user_id.clone()),
                caller.clock_offset_s,
                &app.clock,
            );
            let Some(given) = text("old_password") else {
                // No guess made: the rules answer that it is needed.
                return Ok(None);
            };
            // A guess is counted as a sign-in is, before it is checked.
            if let Some(ip) = ip {
                app.rate_limits
                    .sign_in_attempt(ip)
                    .map_err(ApiError::TooManyRequests)?;
            }
            let counting = lock.clone();
            if let Err(wait) = app.store.write(move |conn| counting.count_attempt(conn)).await? {
                if let Some(ip) = ip {
                    app.rate_limits.sign_in_not_a_failure(ip);
                }
                return Err(ApiError::TooManyRequests(wait as u64));
            }
            let stored = current.clone();
            let matches = tokio::task::spawn_blocking(move || crate::passwords::verify(&given, &stored))
                .await
                .map_err(ApiError::internal)?;
            if !matches {
                app.store.write(move |conn| lock.show_failure(conn)).await?;
                return Err(ApiError::field("old_password", "Old Password is incorrect."));
            }
            // The right password: as after a sign-in, the run is over.
            app.store.write(move |conn| lock.clear(conn)).await?;
            if let Some(ip) = ip {
                app.rate_limits.sign_in_not_a_failure(ip);
            }
            checked_against = Some(current);
        }
    }
    let hash = tokio::task::spawn_blocking(move || crate::passwords::hash(&password))
        .await
        .map_err(ApiError::internal)?
        .map_err(ApiError::internal)?;
    Ok(Some(Prepared {
        hash,
        checked_against,
    }))
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
