//! Developer controls of a test processor, served only when the processor
//! has them (the sandbox): the ACH status simulator and test clocks.

use super::crud::one;
use super::extract::{envelope, query_pairs, IdPath, RawBody};
use super::AppState;
use crate::auth::Caller;
use crate::engine::{render, validate};
use crate::error::{ApiError, ApiResult};
use crate::payments::TransactionId;
use crate::processor::StatusId;
use crate::resources::TRANSACTION;
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use serde_json::{json, Value as JsonValue};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v2/developer/transactions/{id}", put(ach_status))
        .route("/v2/developer/testclock", get(show_clock))
        .route("/v2/developer/testclock/advance", post(advance_clock))
}

/// `PUT /v2/developer/transactions/{id}`: the sandbox's ACH status
/// simulator. Only `status_id` changes, along the allowed flow.
async fn ach_status(
    State(app): State<AppState>,
    caller: Caller,
    IdPath(id): IdPath,
    RawBody(raw): RawBody,
) -> ApiResult<Response> {
    caller.perms.require("transactions.update")?;
    let body = envelope(&raw, "transaction")?;
    if let Some(k) = body.keys().find(|k| *k != "status_id") {
        let k = validate::echo_name(k);
        return Err(ApiError::field(
            k.clone(),
            format!("Only status_id can change here, not {k}."),
        ));
    }
    let to = match body.get("status_id") {
        Some(JsonValue::Number(n)) => n.as_i64(),
        Some(JsonValue::String(s)) => s.trim().parse().ok(),
        _ => None,
    }
    .and_then(|n| u16::try_from(n).ok())
    .and_then(StatusId::from_code)
    .ok_or_else(|| ApiError::field("status_id", "Status Id must be one of 133, 134, 201, 301, 331."))?;
    let cx = app.cx(&caller);
    let record = app
        .payments
        .set_ach_status(cx.clone(), TransactionId::new(id), to)
        .await?;
    Ok(one(
        &TRANSACTION,
        StatusCode::OK,
        JsonValue::Object(render(&cx, &record)),
    ))
}

/// The location a clock request names (`location_id`), else the caller's.
fn clock_location(caller: &Caller, named: Option<String>) -> String {
    named
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| caller.scope.location_id.clone())
}

/// `GET /v2/developer/testclock[?location_id=]`: a location's time.
async fn show_clock(
    State(app): State<AppState>,
    caller: Caller,
    RawQuery(q): RawQuery,
) -> ApiResult<Response> {
    caller.perms.require("locations.read")?;
    let named = query_pairs(q.as_deref())
        .into_iter()
        .find(|(k, _)| k == "location_id")
        .map(|(_, v)| v);
    let location = clock_location(&caller, named);
    let cx = app.cx(&caller);
    let wall = app.clock.now_ts();
    let clock = app
        .store
        .read(move |conn| crate::testclock::show(&cx.scope, conn, &location, wall))
        .await?;
    Ok(Json(json!({ "testclock": clock.to_json() })).into_response())
}

/// `POST /v2/developer/testclock/advance` with `{"testclock": {"seconds":
/// N, "location_id": ...}}`: moves the location's time N seconds forward
/// (0 runs what is due now), then runs the background work that came due
/// and answers when it is done.
async fn advance_clock(
    State(app): State<AppState>,
    caller: Caller,
    RawBody(raw): RawBody,
) -> ApiResult<Response> {
    caller.perms.require("locations.update")?;
    let body = envelope(&raw, "testclock")?;
    if let Some(k) = body
        .keys()
        .find(|k| !matches!(k.as_str(), "seconds" | "location_id"))
    {
        let k = validate::echo_name(k);
        return Err(ApiError::field(
            k.clone(),
            format!("Unknown field {k}: send seconds and location_id."),
        ));
    }
    let seconds = match body.get("seconds") {
        Some(JsonValue::Number(n)) => n.as_i64(),
        Some(JsonValue::String(s)) => s.trim().parse().ok(),
        None => return Err(ApiError::field("seconds", validate::blank("seconds"))),
        _ => None,
    }
    .ok_or_else(|| ApiError::field("seconds", "Seconds must be a whole number."))?;
    let named = match body.get("location_id") {
        None | Some(JsonValue::Null) => None,
        Some(JsonValue::String(s)) => Some(s.clone()),
        Some(_) => return Err(ApiError::field("location_id", "Location Id must be a string.")),
    };
    let location = clock_location(&caller, named);
    let workers = crate::testclock::Workers {
        deliveries: &app.deliveries,
        schedules: &app.schedules,
        mailer: &app.mailer,
    };
    let (clock, ran) = crate::testclock::advance_and_run(
        &app.store,
        workers,
        caller.scope.clone(),
        location,
        seconds,
        &app.clock,
    )
    .await?;
    // Terminal requests waiting on the location's clock look again.
    app.router.clock_moved().await;
    let mut answer = clock.to_json();
    answer["ran"] = ran.to_json();
    Ok(Json(json!({ "testclock": answer })).into_response())
}
