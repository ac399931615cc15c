//! Postback routes beyond the generic ones: a config's delivery log and
//! the redeliver action.

use super::crud::{list_within, one, Within};
use super::extract::IdPath;
use super::AppState;
use crate::auth::Caller;
use crate::db::Sql;
use crate::engine::query;
use crate::engine::record::Record;
use crate::engine::render;
use crate::error::{ApiError, ApiResult};
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
    let now_ms = crate::clock::Clock.now_ms();
    let record = app
        .store
        .write(move |conn| {
            let delivery = query::find(conn, &POSTBACK_DELIVERY, &cx2.scope, &id)?
                .ok_or_else(|| ApiError::not_found("postbackdelivery"))?;
            let status = delivery.text("status").unwrap_or_default().to_string();
            if status != "failed" {
                return Err(ApiError::field(
                    "status",
                    format!("Only a failed delivery can be redelivered; this one is {status}."),
                ));
            }
            conn.execute(&Sql::with(
                "UPDATE postback_deliveries SET status = 'pending', attempts = 0, due_ms = ?, next_attempt_ts = ?, \
                 lease_owner = NULL, lease_until_ms = NULL, modified_ts = ? WHERE id = ? AND status = 'failed'",
                vec![
                    now_ms.into(),
                    (now_ms / 1000).into(),
                    cx2.now.into(),
                    delivery.id().into(),
                ],
            ))?;
            let fresh = query::find(conn, &POSTBACK_DELIVERY, &cx2.scope, delivery.id())?
                .ok_or_else(|| ApiError::not_found("postbackdelivery"))?;
            Ok::<Record, ApiError>(fresh)
        })
        .await?;
    crate::postbacks::outbox::wake().notify_one();
    Ok(one(
        &POSTBACK_DELIVERY,
        StatusCode::OK,
        JsonValue::Object(render(&cx, &record)),
    ))
}
