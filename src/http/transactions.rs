//! Transactions, batches and Level 3 over HTTP. Handlers are thin: the
//! steps (prepare, processor call, complete) live in `payments::service`.

use super::crud::{self, one};
use super::extract::{envelope, IdPath, RawBody};
use super::AppState;
use crate::auth::Caller;
use crate::clock::{date_text, timestamp_text};
use crate::engine::{query, render, update_record, validate};
use crate::error::{ApiError, ApiResult};
use crate::payments::actions;
use crate::payments::idempotency::{self, Claim};
use crate::payments::service::{self, Call, Prepared};
use crate::payments::{batches, level3};
use crate::processor::sandbox::{ach_chargeback_reason, ach_status_change_allowed};
use crate::processor::{ProcessorError, ProcessorResponse, ReasonCode, SettleRequest, StatusId};
use crate::resources::{TRANSACTION, TRANSACTION_BATCH};
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
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
                .put(update),
        )
        .route("/v2/transactions/{id}/bininfo", get(bininfo))
        .route("/v2/developer/transactions/{id}", put(simulate_ach_status))
        .merge(crud::routes(batch, crud::READ_ONLY))
        .route("/v2/transactionbatches/{id}/settle", post(settle))
        .route("/v2/transactionlevel3s", post(level3_post))
        .route(
            "/v2/transactionlevel3s/{id}",
            get(level3_get).delete(level3_delete),
        )
}

/// Asks the processor, on a blocking thread, then waits out the answer's
/// delay without holding that thread.
async fn ask(app: &AppState, call: Call) -> Result<ProcessorResponse, ProcessorError> {
    let processor = app.payments.processor.clone();
    let answer = tokio::task::spawn_blocking(move || call.run(&*processor))
        .await
        .map_err(|e| ProcessorError::Unavailable(format!("processor call panicked: {e}")))?;
    if let Ok(a) = &answer {
        if !a.delay.is_zero() {
            tokio::time::sleep(a.delay).await;
        }
    }
    answer
}

fn replay(status: u16, body: JsonValue) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    let mut response = (status, Json(body)).into_response();
    response.headers_mut().insert(
        "idempotent-replayed",
        axum::http::HeaderValue::from_static("true"),
    );
    response
}

/// Claims the request's Idempotency-Key; `Ok(Some(response))` is a replay.
async fn claim(
    app: &AppState,
    cx: &crate::engine::Cx,
    headers: &HeaderMap,
    method: &str,
    path: &str,
    raw: &[u8],
) -> ApiResult<(Option<String>, Option<Response>)> {
    let Some(key) = idempotency::key(headers)? else {
        return Ok((None, None));
    };
    let print = idempotency::fingerprint(method, path, raw);
    match idempotency::claim(&app.store, cx, &key, &print).await? {
        Claim::Replay(status, body) => Ok((Some(key), Some(replay(status, body)))),
        Claim::Fresh => Ok((Some(key), None)),
    }
}

/// `POST /v2/transactions`.
async fn create(
    State(app): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    RawBody(raw): RawBody,
) -> ApiResult<Response> {
    caller.perms.require("transactions.create")?;
    let cx = app.cx(&caller);
    let (key, replayed) = claim(&app, &cx, &headers, "POST", "/v2/transactions", &raw).await?;
    if let Some(r) = replayed {
        return Ok(r);
    }
    let result = run_create(&app, &cx, &raw, key.clone()).await;
    if let (Err(e), Some(k)) = (&result, &key) {
        idempotency::fail(&app.store, &cx, k, e).await;
    }
    result.map(|body| (StatusCode::CREATED, Json(body)).into_response())
}

/// A processor failure as the answer to record: a timeout reversal is
/// sent first when the request may have reached the processor.
async fn failure_answer(app: &AppState, prepared: &Prepared, e: ProcessorError) -> ProcessorResponse {
    let reason = match &e {
        ProcessorError::Unavailable(_) => {
            let method = match prepared.call {
                Call::AchDebit(_) | Call::AchCredit(_) => crate::processor::PaymentMethod::Ach,
                _ => crate::processor::PaymentMethod::Cc,
            };
            let req = crate::processor::ReversalRequest {
                gateway_id: prepared.id.clone(),
                amount: 0,
                method,
            };
            let processor = app.payments.processor.clone();
            let _ = tokio::task::spawn_blocking(move || processor.reverse(&req)).await;
            ReasonCode(1531)
        }
        _ => ReasonCode(1650),
    };
    tracing::warn!(transaction_id = %prepared.id, error = %e, "processor refused the request");
    service::local_decline(reason, &e.to_string())
}

async fn run_create(
    app: &AppState,
    cx: &crate::engine::Cx,
    raw: &[u8],
    key: Option<String>,
) -> ApiResult<JsonValue> {
    let body = envelope(raw, "transaction")?;
    let parsed = actions::parse(&body, false)?;
    let node = app.payments.node_id.to_string();
    let (cx2, key2) = (cx.clone(), key.clone());
    let prepared = app
        .store
        .write(move |conn| service::prepare_create(&cx2, conn, parsed, &node, key2.as_deref()))
        .await?;
    let answer = match ask(app, prepared.call.clone()).await {
        Ok(a) => a,
        Err(e) => failure_answer(app, &prepared, e).await,
    };
    let cx3 = cx.clone();
    app.store
        .write(move |conn| service::complete_create(&cx3, conn, &prepared, &answer, key.as_deref()))
        .await
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
    let cx = app.cx(&caller);
    let path = format!("/v2/transactions/{id}");
    let (key, replayed) = claim(&app, &cx, &headers, "PUT", &path, &raw).await?;
    if let Some(r) = replayed {
        return Ok(r);
    }
    let result = run_update(&app, &cx, id, &raw, key.clone()).await;
    if let (Err(e), Some(k)) = (&result, &key) {
        idempotency::fail(&app.store, &cx, k, e).await;
    }
    result.map(|body| (StatusCode::OK, Json(body)).into_response())
}

/// What the first job of a PUT action leaves to do.
enum UpdateStep {
    /// Finished in that job (tipadjust, edit): the response body.
    Done(JsonValue),
    /// The processor must answer before the action completes.
    AskProcessor(Box<Prepared>),
}

async fn run_update(
    app: &AppState,
    cx: &crate::engine::Cx,
    id: String,
    raw: &[u8],
    key: Option<String>,
) -> ApiResult<JsonValue> {
    let body = envelope(raw, "transaction")?;
    let parsed = actions::parse(&body, true)?;
    let node = app.payments.node_id.to_string();
    let cx2 = cx.clone();
    let key2 = key.clone();
    // Actions without a processor call run in one job.
    let prepared = app
        .store
        .write(move |conn| {
            let tx = query::find(conn, &TRANSACTION, &cx2.scope, &id)?
                .ok_or_else(|| ApiError::not_found("transaction"))?;
            let prepared = service::prepare_update(&cx2, conn, &tx, parsed, &node)?;
            if matches!(prepared.call, Call::Nothing) {
                let body = service::complete_update(&cx2, conn, &prepared, None, key2.as_deref())?;
                return Ok(UpdateStep::Done(body));
            }
            Ok(UpdateStep::AskProcessor(Box::new(prepared)))
        })
        .await?;
    let prepared = match prepared {
        UpdateStep::AskProcessor(p) => *p,
        UpdateStep::Done(body) => return Ok(body),
    };
    let answer = match ask(app, prepared.call.clone()).await {
        Ok(a) => a,
        Err(e) => {
            let p = prepared.clone();
            app.store
                .write(move |conn| service::abandon_update(conn, &p))
                .await?;
            return Err(match e {
                ProcessorError::Unavailable(m) => {
                    tracing::warn!(error = %m, "processor unavailable");
                    ApiError::Unavailable("The processor is not reachable; retry shortly.".into())
                }
                other => ApiError::field("action", other.to_string()),
            });
        }
    };
    let cx3 = cx.clone();
    app.store
        .write(move |conn| service::complete_update(&cx3, conn, &prepared, Some(&answer), key.as_deref()))
        .await
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

/// `PUT /v2/developer/transactions/{id}`: the sandbox's ACH status
/// simulator. Only `status_id` changes, along the allowed flow.
async fn simulate_ach_status(
    State(app): State<AppState>,
    caller: Caller,
    IdPath(id): IdPath,
    RawBody(raw): RawBody,
) -> ApiResult<Response> {
    caller.perms.require("transactions.update")?;
    if app.payments.processor.name() != "sandbox" {
        return Err(ApiError::NotFound("No such endpoint.".into()));
    }
    let body = envelope(&raw, "transaction")?;
    for k in body.keys() {
        if k != "status_id" {
            let k = validate::echo_name(k);
            return Err(ApiError::field(
                k.clone(),
                format!("Only status_id can change here, not {k}."),
            ));
        }
    }
    let to = match body.get("status_id") {
        Some(JsonValue::Number(n)) => n.as_i64(),
        Some(JsonValue::String(s)) => s.trim().parse().ok(),
        _ => None,
    }
    .and_then(|n| StatusId::from_code(n as u16))
    .ok_or_else(|| ApiError::field("status_id", "Status Id must be one of 133, 134, 201, 301, 331."))?;
    let cx = app.cx(&caller);
    let cx2 = cx.clone();
    let record = app
        .store
        .write(move |conn| {
            let tx = query::find(conn, &TRANSACTION, &cx2.scope, &id)?
                .ok_or_else(|| ApiError::not_found("transaction"))?;
            if tx.text("payment_method") != Some("ach") {
                return Err(ApiError::field("status_id", "Only ACH transactions change status here."));
            }
            let from = crate::payments::state::status(&tx)
                .ok_or_else(|| ApiError::field("status_id", "The transaction has no status yet."))?;
            if tx.text("pending_action").is_some() {
                return Err(ApiError::field("status_id", "Another action on this transaction is in progress."));
            }
            if !ach_status_change_allowed(from, to) {
                return Err(ApiError::field(
                    "status_id",
                    format!(
                        "Status {} cannot change to {} (allowed: 131/132 -> 133 -> 134; any of these -> 201, 301 or 331; 201, 301 and 331 are final).",
                        from.code(),
                        to.code()
                    ),
                ));
            }
            let today = date_text(cx2.now, chrono_tz::UTC);
            let mut changes = vec![("status_id", crate::db::Value::Int(to.code() as i64))];
            match to {
                StatusId::AchSettled => changes.push(("settle_date", today.into())),
                StatusId::ChargedBack => {
                    let reason = ach_chargeback_reason(tx.int("transaction_amount").unwrap_or(0));
                    changes.push(("reason_code_id", (reason.code() as i64).into()));
                    changes.push(("charge_back_date", today.clone().into()));
                    changes.push(("return_date", today.into()));
                    if let Some(v) = reason.ach_return_verbiage() {
                        changes.push(("verbiage", v.into()));
                    }
                }
                StatusId::Voided => {
                    changes.push(("reason_code_id", (ReasonCode::VOIDED.code() as i64).into()));
                    changes.push(("void_date", timestamp_text(cx2.now).into()));
                }
                StatusId::Declined => {
                    changes.push(("reason_code_id", (ReasonCode::DO_NOT_HONOR_GENERAL.code() as i64).into()))
                }
                _ => {}
            }
            let input = validate::UpdateInput::named(&TRANSACTION, changes)?;
            update_record(&cx2, conn, tx, input)
        })
        .await?;
    Ok(one(
        &TRANSACTION,
        StatusCode::OK,
        JsonValue::Object(render(&cx, &record)),
    ))
}

/// `POST /v2/transactionbatches/{id}/settle`.
async fn settle(State(app): State<AppState>, caller: Caller, IdPath(id): IdPath) -> ApiResult<Response> {
    caller.perms.require("transactionbatches.settle")?;
    let cx = app.cx(&caller);
    let cx2 = cx.clone();
    let (before, amounts, attempt) = app
        .store
        .write(move |conn| {
            let batch = query::find(conn, &TRANSACTION_BATCH, &cx2.scope, &id)?
                .ok_or_else(|| ApiError::not_found("transactionbatch"))?;
            let (amounts, attempt) = batches::begin_settle(conn, &cx2, &batch)?;
            Ok((batch, amounts, attempt))
        })
        .await?;
    let processor = app.payments.processor.clone();
    let request = SettleRequest {
        batch_id: before.id().to_string(),
        amounts,
        attempt,
    };
    let answer = tokio::task::spawn_blocking(move || processor.settle(&request))
        .await
        .map_err(ApiError::internal)?
        .map_err(|e| e.to_string());
    let settle_date = date_text(cx.now, cx.scope.tz);
    let cx3 = cx.clone();
    let record = app
        .store
        .write(move |conn| batches::finish_settle(conn, &cx3, before, answer, &settle_date))
        .await?;
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
