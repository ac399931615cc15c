//! Postback routes beyond the generic ones: a config's delivery log and
//! the redeliver action.

use super::crud::{many, one};
use super::extract::{query_pairs, IdPath};
use super::AppState;
use crate::auth::Caller;
use crate::db::Sql;
use crate::engine::query::{self, ListQuery};
use crate::engine::record::Record;
use crate::engine::{list_meta, render, render_expanded};
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
    caller.perms.require("postbackdeliveries.read")?;
    let pairs = query_pairs(q.as_deref());
    let cx = app.cx(&caller);
    let q = ListQuery::parse(&POSTBACK_DELIVERY, &pairs, &cx.scope, cx.now)?;
    let cx2 = cx.clone();
    let q2 = q.clone();
    let config_id = id.clone();
    let (records, total) = app
        .store
        .read(move |conn| {
            query::find(conn, &POSTBACK_CONFIG, &cx2.scope, &config_id)?
                .ok_or_else(|| ApiError::not_found("postbackconfig"))?;
            let only_config = |sql: &mut Sql| {
                sql.push(" AND t.postback_config_id = ").bind(config_id.clone());
            };
            let (records, total) =
                query::list(conn, &POSTBACK_DELIVERY, &cx2.scope, &q2, Some(&only_config))?;
            let mut out = Vec::with_capacity(records.len());
            for r in &records {
                out.push(render_expanded(&cx2, conn, r, &q2.expand)?);
            }
            Ok((out, total))
        })
        .await?;
    let meta = list_meta(&cx, &format!("/v2/postbackconfigs/{id}/deliveries"), &q, total);
    Ok(many(&POSTBACK_DELIVERY, records, meta))
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
