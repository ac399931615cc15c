//! Postback routes beyond the generic ones: a config's delivery log and
//! the redeliver action.

use super::crud::{list_within, one, Within};
use super::extract::IdPath;
use super::AppState;
use crate::auth::Caller;
use crate::engine::render;
use crate::error::ApiResult;
use crate::resources::{POSTBACK_CONFIG, POSTBACK_DELIVERY};
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use serde_json::Value as JsonValue;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v2/postbackconfigs/{id}/deliveries", get(deliveries))
        .route("/v2/postbackdeliveries/{id}/redeliver", post(redeliver))
}

/// `GET /v2/postbackconfigs/{id}/deliveries`: the config's deliveries,
/// newest first, with the list's filters, sort and pages.
async fn deliveries(
    State(app): State<AppState>,
    caller: Caller,
    IdPath(id): IdPath,
    RawQuery(q): RawQuery,
) -> ApiResult<Response> {
    let within = Within {
        parent: &POSTBACK_CONFIG,
        path: format!("/v2/postbackconfigs/{id}/deliveries"),
        parent_id: id,
        column: "postback_config_id",
    };
    list_within(&POSTBACK_DELIVERY, app, caller, q, Some(within)).await
}

/// `POST /v2/postbackdeliveries/{id}/redeliver`: a failed delivery is sent
/// again from its first attempt; its events keep their order from here on.
async fn redeliver(State(app): State<AppState>, caller: Caller, IdPath(id): IdPath) -> ApiResult<Response> {
    caller.perms.require("postbackdeliveries.redeliver")?;
    let cx = app.cx(&caller);
    let cx2 = cx.clone();
    let now_ms = app.clock.now_ms();
    let record = app
        .store
        .write(move |conn| crate::postbacks::schedule::redeliver(&cx2, conn, &id, now_ms))
        .await?;
    app.deliveries.wake();
    Ok(one(
        &POSTBACK_DELIVERY,
        StatusCode::OK,
        JsonValue::Object(render(&cx, &record)),
    ))
}
