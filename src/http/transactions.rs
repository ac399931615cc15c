//! Transactions, batches and Level 3 over HTTP. Handlers parse, make one
//! call to the payments domain and render; the steps of a payment live in
//! `payments`.

use super::crud::{self, one};
use super::extract::{envelope, IdPath, RawBody};
use super::AppState;
use crate::auth::Caller;
use crate::engine::{query, render};
use crate::error::{ApiError, ApiResult};
use crate::payments::actions::Action;
use crate::payments::{ach_update, actions, idempotency, level3};
use crate::payments::{BatchId, FollowUp, Idempotency, NewPayment, Origin, Reply, TransactionId};
use crate::resources::{TRANSACTION, TRANSACTION_BATCH};
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value as JsonValue};

pub fn routes() -> Router<AppState> {
    let tx = &TRANSACTION;
    let batch = &TRANSACTION_BATCH;
    Router::new()
        .route(
            "/v2/transactions",
            get(move |s: State<AppState>, c: Caller, q: RawQuery| crud::list(tx, s, c, q)).post(create),
        )
        .route(
            "/v2/transactions/{id}",
            get(move |s: State<AppState>, c: Caller, p: IdPath, q: RawQuery| crud::read(tx, s, c, p, q))
                .put(update)
                // The reference's walkthrough and published clients POST
                // follow-up actions: the same operation as PUT.
                .post(update),
        )
        .route("/v2/transactions/{id}/bininfo", get(bininfo))
        .route("/v2/transactions/{id}/override", post(override_hold))
        .route("/v2/transactions/{id}/achupdate", post(ach_update))
        .merge(crud::routes(batch, crud::READ_ONLY))
        .route("/v2/transactionbatches/{id}/settle", post(settle))
        .route("/v2/transactionlevel3s", post(level3_post))
        .route(
            "/v2/transactionlevel3s/{id}",
            get(level3_get).delete(level3_delete),
        )
}

fn reply(reply: Reply) -> Response {
    let status = StatusCode::from_u16(reply.status).unwrap_or(StatusCode::OK);
    let mut response = crate::error::replayed_answer(status, reply.body);
    if reply.replayed {
        response
            .headers_mut()
            .insert("idempotent-replayed", HeaderValue::from_static("true"));
    }
    response
}

/// The request's `Idempotency-Key`, if sent, with the digest of the
/// request it came with.
pub(super) fn idempotency(
    headers: &HeaderMap,
    method: &str,
    path: &str,
    raw: &[u8],
) -> ApiResult<Option<Idempotency>> {
    let Some(value) = headers.get("idempotency-key") else {
        return Ok(None);
    };
    Ok(Some(Idempotency {
        key: idempotency::check_key(value.as_bytes())?,
        fingerprint: idempotency::fingerprint(method, path, raw),
    }))
}

/// `POST /v2/transactions`.
async fn create(
    State(app): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    RawBody(raw): RawBody,
) -> ApiResult<Response> {
    caller.perms.require("transactions.create")?;
    let idempotency = idempotency(&headers, "POST", "/v2/transactions", &raw)?;
    let cx = app.cx(&caller);
    let input = match envelope(&raw, "transaction").and_then(|body| actions::parse(&body, false)) {
        Ok(input) => input,
        Err(e) => return Ok(reply(app.payments.refuse(cx, idempotency, e).await?)),
    };
    let request = NewPayment {
        input,
        origin: Origin::api(),
        idempotency,
    };
    Ok(reply(app.payments.create(cx, request).await?))
}

/// `PUT /v2/transactions/{id}`: authcomplete, authincrement, void,
/// partialreversal, tipadjust, edit.
async fn update(
    State(app): State<AppState>,
    caller: Caller,
    IdPath(id): IdPath,
    headers: HeaderMap,
    RawBody(raw): RawBody,
) -> ApiResult<Response> {
    caller.perms.require("transactions.update")?;
    let idempotency = idempotency(&headers, "PUT", &format!("/v2/transactions/{id}"), &raw)?;
    let cx = app.cx(&caller);
    let input = match envelope(&raw, "transaction").and_then(|body| actions::parse(&body, true)) {
        Ok(input) => input,
        Err(e) => return Ok(reply(app.payments.refuse(cx, idempotency, e).await?)),
    };
    let request = FollowUp {
        transaction: TransactionId::new(id),
        input,
        idempotency,
    };
    Ok(reply(app.payments.update(cx, request).await?))
}

/// `POST /v2/transactions/{id}/override`: a manager approves a TEL, POP
/// or C21 debit held with 1663. The body is empty: nothing, `{}` or
/// `{"transaction": {}}`.
async fn override_hold(
    State(app): State<AppState>,
    caller: Caller,
    IdPath(id): IdPath,
    headers: HeaderMap,
    RawBody(raw): RawBody,
) -> ApiResult<Response> {
    caller.perms.require("transactions.update")?;
    let path = format!("/v2/transactions/{id}/override");
    let idempotency = idempotency(&headers, "POST", &path, &raw)?;
    let cx = app.cx(&caller);
    let input = match empty_body(&raw).and_then(|body| actions::parse_for(Action::Override, &body)) {
        Ok(input) => input,
        Err(e) => return Ok(reply(app.payments.refuse(cx, idempotency, e).await?)),
    };
    let request = FollowUp {
        transaction: TransactionId::new(id),
        input,
        idempotency,
    };
    Ok(reply(app.payments.update(cx, request).await?))
}

/// The fields of a body that should carry none: an empty body and `{}`
/// are the empty record; otherwise the usual `{"transaction": {...}}`.
fn empty_body(raw: &[u8]) -> ApiResult<serde_json::Map<String, JsonValue>> {
    if raw.iter().all(|b| b.is_ascii_whitespace()) {
        return Ok(Default::default());
    }
    if let Ok(JsonValue::Object(o)) = serde_json::from_slice::<JsonValue>(raw) {
        if o.is_empty() {
            return Ok(o);
        }
    }
    envelope(raw, "transaction")
}

/// `POST /v2/transactions/{id}/achupdate`: a POP or C21 debit voided and
/// made again with a corrected MICR line and amount; answers 201 with the
/// new transaction (its previous_transaction_id names the voided one).
async fn ach_update(
    State(app): State<AppState>,
    caller: Caller,
    IdPath(id): IdPath,
    headers: HeaderMap,
    RawBody(raw): RawBody,
) -> ApiResult<Response> {
    caller.perms.require("transactions.create")?;
    caller.perms.require("transactions.update")?;
    let path = format!("/v2/transactions/{id}/achupdate");
    let idempotency = idempotency(&headers, "POST", &path, &raw)?;
    let cx = app.cx(&caller);
    let input = match envelope(&raw, "transaction").and_then(|body| ach_update::parse(&body)) {
        Ok(input) => input,
        Err(e) => return Ok(reply(app.payments.refuse(cx, idempotency, e).await?)),
    };
    let request = FollowUp {
        transaction: TransactionId::new(id),
        input,
        idempotency,
    };
    Ok(reply(app.payments.ach_update(cx, request).await?))
}

/// `GET /v2/transactions/{id}/bininfo`: the issuer facts of the card.
async fn bininfo(State(app): State<AppState>, caller: Caller, IdPath(id): IdPath) -> ApiResult<Response> {
    caller.perms.require("transactions.read")?;
    let cx = app.cx(&caller);
    let info = app
        .store
        .read(move |conn| {
            let tx = query::find(conn, &TRANSACTION, &cx.scope, &id)?
                .ok_or_else(|| ApiError::not_found("transaction"))?;
            if tx.text("payment_method") != Some("cc") {
                return Err(ApiError::field(
                    "payment_method",
                    "BIN information exists for card transactions only.",
                ));
            }
            super::bins::card_bininfo(&cx, conn, &tx)
        })
        .await?;
    Ok(Json(json!({ "bininfo": info })).into_response())
}

/// `POST /v2/transactionbatches/{id}/settle`.
async fn settle(State(app): State<AppState>, caller: Caller, IdPath(id): IdPath) -> ApiResult<Response> {
    caller.perms.require("transactionbatches.settle")?;
    let cx = app.cx(&caller);
    let record = app.payments.settle(cx.clone(), BatchId::new(id)).await?;
    Ok(one(
        &TRANSACTION_BATCH,
        StatusCode::OK,
        JsonValue::Object(render(&cx, &record)),
    ))
}

async fn level3_post(
    State(app): State<AppState>,
    caller: Caller,
    RawBody(raw): RawBody,
) -> ApiResult<Response> {
    caller.perms.require("transactionlevel3s.create")?;
    let body = envelope(&raw, "transactionlevel3")?;
    let cx = app.cx(&caller);
    let out = app
        .store
        .write(move |conn| level3::post(&cx, conn, &body))
        .await?;
    Ok((StatusCode::CREATED, Json(json!({ "transactionlevel3": out }))).into_response())
}

async fn level3_get(State(app): State<AppState>, caller: Caller, IdPath(id): IdPath) -> ApiResult<Response> {
    caller.perms.require("transactionlevel3s.read")?;
    let cx = app.cx(&caller);
    let out = app.store.read(move |conn| level3::get(&cx, conn, &id)).await?;
    Ok(Json(json!({ "transactionlevel3": out })).into_response())
}

async fn level3_delete(
    State(app): State<AppState>,
    caller: Caller,
    IdPath(id): IdPath,
) -> ApiResult<Response> {
    caller.perms.require("transactionlevel3s.delete")?;
    let cx = app.cx(&caller);
    app.store
        .write(move |conn| level3::delete(&cx, conn, &id))
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
