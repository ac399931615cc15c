//! `/v2/terminals` (the generic routes, with a create of its own that
//! hands the new terminal's device secret to the caller, once: ADR 0018),
//! and the requests that reach a terminal through the router (ADR 0020):
//! router transactions, router account vaults, device terms, the online
//! check and a clerk's cancel. The device's own connection is
//! `http::devices`.

use super::crud::{self, Verbs};
use super::extract::{envelope, IdPath, RawBody};
use super::AppState;
use crate::auth::Caller;
use crate::engine::{self, validate};
use crate::error::{ApiError, ApiResult};
use crate::resources::{DEVICE_TERM, TERMINAL};
use crate::terminals::requests::{self, Services};
use crate::terminals::router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value as JsonValue};

/// The member of the create answer that holds the device secret.
pub const SECRET_MEMBER: &str = "terminal_secret";

pub fn routes() -> Router<AppState> {
    crud::routes(
        &TERMINAL,
        Verbs {
            create: false,
            update: true,
            delete: true,
            own_routes: false,
        },
    )
    .route(&TERMINAL.path(), post(create))
    .route("/v2/terminals/{id}/isonline", get(is_online))
    .route("/v2/terminals/{id}/isOnline", get(is_online))
    .route("/v2/terminals/{id}/cancel", post(cancel))
    .route("/v2/routertransactions", post(router_transaction))
    .route("/v2/routeraccountvaults", post(router_account_vault))
    .merge(crud::routes(
        &DEVICE_TERM,
        Verbs {
            create: false,
            update: false,
            delete: false,
            own_routes: false,
        },
    ))
    .route(&DEVICE_TERM.path(), post(device_term))
}

/// `POST /v2/terminals`: the generic create, with the device secret made
/// here so that only its digest reaches the database and the clear secret
/// only this answer.
async fn create(State(app): State<AppState>, caller: Caller, RawBody(body): RawBody) -> ApiResult<Response> {
    caller.perms.require(&TERMINAL.permission("create"))?;
    let input = envelope(&body, TERMINAL.name)?;
    let mut input = validate::for_create(&TERMINAL, &input).map_err(ApiError::Validation)?;
    let secret = crate::terminals::new_secret();
    input
        .record
        .set("secret_digest", crate::crypto::hash_api_key(&secret));
    let cx = app.cx(&caller);
    let cx2 = cx.clone();
    let (record, _) = app
        .store
        .write(move |conn| engine::create(&cx2, conn, &TERMINAL, input))
        .await?;
    let mut out = engine::render(&cx, &record);
    let links = out.remove("_links");
    out.insert(SECRET_MEMBER.into(), JsonValue::String(secret));
    if let Some(links) = links {
        out.insert("_links".into(), links);
    }
    Ok(crud::one(&TERMINAL, StatusCode::CREATED, JsonValue::Object(out)))
}

fn services(app: &AppState) -> Services<'_> {
    Services {
        router: &app.router,
        payments: &app.payments,
        store: &app.store,
    }
}

/// A router answer: a refusal replayed under its `Idempotency-Key`
/// carries this request's id like every error body.
fn answer((status, body): (u16, JsonValue)) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    crate::error::replayed_answer(status, body)
}

/// `POST /v2/routertransactions`: held open while the terminal works
/// (up to its `overall_timeout`, 300 s at most).
async fn router_transaction(
    State(app): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    RawBody(raw): RawBody,
) -> ApiResult<Response> {
    caller.perms.require("transactions.create")?;
    let idempotency = super::transactions::idempotency(&headers, "POST", "/v2/routertransactions", &raw)?;
    let body = envelope(&raw, "routertransaction")?;
    let cx = app.cx(&caller);
    requests::transaction(services(&app), &cx, caller.clock_offset_s, body, idempotency)
        .await
        .map(answer)
}

/// `POST /v2/routeraccountvaults`: a card read on the terminal, stored.
async fn router_account_vault(
    State(app): State<AppState>,
    caller: Caller,
    RawBody(raw): RawBody,
) -> ApiResult<Response> {
    caller.perms.require("accountvaults.create")?;
    let body = envelope(&raw, "routeraccountvault")?;
    let cx = app.cx(&caller);
    requests::account_vault(services(&app), &cx, caller.clock_offset_s, body)
        .await
        .map(answer)
}

/// `POST /v2/deviceterms`: the terms shown on the terminal, recorded
/// with the cardholder's answer.
async fn device_term(
    State(app): State<AppState>,
    caller: Caller,
    RawBody(raw): RawBody,
) -> ApiResult<Response> {
    caller.perms.require(&DEVICE_TERM.permission("create"))?;
    let body = envelope(&raw, DEVICE_TERM.name)?;
    let cx = app.cx(&caller);
    requests::device_term(services(&app), &cx, caller.clock_offset_s, body)
        .await
        .map(answer)
}

/// `GET /v2/terminals/{id}/isonline`: 200 when the device is connected,
/// 503 when it is not (the reference's answer for an offline device).
async fn is_online(State(app): State<AppState>, caller: Caller, IdPath(id): IdPath) -> ApiResult<Response> {
    caller.perms.require(&TERMINAL.permission("read"))?;
    let cx = app.cx(&caller);
    let terminal = requests::terminal_of(&app.store, &cx, &id).await?;
    if !app.router.is_online(terminal.id()).await? {
        return Err(router::offline());
    }
    Ok(Json(json!({ "terminal": {
        "id": terminal.id(),
        "is_online": true,
        "last_registration_ts": terminal.int("last_registration_ts"),
    } }))
    .into_response())
}

/// `POST /v2/terminals/{id}/cancel`: the clerk stops what the terminal
/// is doing; the request it was working on answers `cancelled` (unless
/// its payment had begun). 202 when the cancel reached the device's node,
/// 503 when the device is offline.
async fn cancel(State(app): State<AppState>, caller: Caller, IdPath(id): IdPath) -> ApiResult<Response> {
    caller.perms.require("transactions.create")?;
    let cx = app.cx(&caller);
    let terminal = requests::terminal_of(&app.store, &cx, &id).await?;
    if !app.router.cancel_terminal(terminal.id()).await? {
        return Err(router::offline());
    }
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({ "terminal": { "id": id, "cancel_requested": true } })),
    )
        .into_response())
}
