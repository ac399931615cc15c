//! The boarding API v1 (`boarding`): the public offer and application
//! endpoints a prospective merchant's form calls, and the operators'
//! offer administration behind a bearer token. See README, "Boarding API".

use super::extract::{query_pairs, IdPath, RawBody};
use super::AppState;
use crate::boarding::{applications, offers, operators};
use crate::error::{ApiError, ApiResult};
use axum::extract::{FromRequestParts, Path, RawQuery, State};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Map, Value};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/offer/vanityurl/{vanity}", get(offer_by_vanity))
        .route("/v1/offer", post(offer_create))
        .route("/v1/offer/{id}", get(offer_read).put(offer_update))
        .route("/v1/offers", get(offer_list))
        .route("/v1/application", post(application_create))
        .route(
            "/v1/application/{id}",
            get(application_read).put(application_update),
        )
        .route("/v1/application/{id}/validate", get(application_validate))
        .route("/v1/application/{id}/signature", post(application_sign))
        .route("/v1/applications", get(application_list))
}

/// An operator authenticated by `Authorization: Bearer <token>`.
pub struct Operator;

impl FromRequestParts<AppState> for Operator {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let token = parts
            .headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
            .map(|t| t.trim().to_string());
        state
            .store
            .read(move |conn| operators::authenticate(conn, token.as_deref()))
            .await?;
        Ok(Operator)
    }
}

/// The body as a JSON object (boarding bodies have no envelope).
fn object(body: &[u8]) -> ApiResult<Map<String, Value>> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::BadRequest("A JSON object body is required.".into()));
    }
    match super::json_body::parse(body)? {
        Value::Object(m) => Ok(m),
        _ => Err(ApiError::BadRequest(
            "The request body must be a JSON object.".into(),
        )),
    }
}

fn created(v: Value) -> Response {
    (StatusCode::CREATED, Json(v)).into_response()
}

async fn offer_by_vanity(State(app): State<AppState>, Path(vanity): Path<String>) -> ApiResult<Json<Value>> {
    let offer = app
        .store
        .read(move |conn| offers::find_open_by_vanity(conn, &vanity))
        .await?
        .ok_or_else(|| ApiError::not_found("Offer"))?;
    Ok(Json(offer.to_json()))
}

async fn offer_create(
    State(app): State<AppState>,
    _: Operator,
    RawBody(body): RawBody,
) -> ApiResult<Response> {
    let input = object(&body)?;
    let now = app.clock.now_ts();
    let offer = app
        .store
        .write(move |conn| offers::create(conn, &input, now))
        .await?;
    Ok(created(offer.to_json()))
}

async fn offer_read(State(app): State<AppState>, _: Operator, IdPath(id): IdPath) -> ApiResult<Json<Value>> {
    let offer = app
        .store
        .read(move |conn| offers::find(conn, &id))
        .await?
        .ok_or_else(|| ApiError::not_found("Offer"))?;
    Ok(Json(offer.to_json()))
}

async fn offer_update(
    State(app): State<AppState>,
    _: Operator,
    IdPath(id): IdPath,
    RawBody(body): RawBody,
) -> ApiResult<Json<Value>> {
    let input = object(&body)?;
    let now = app.clock.now_ts();
    let offer = app
        .store
        .write(move |conn| offers::update(conn, &id, &input, now))
        .await?;
    Ok(Json(offer.to_json()))
}

async fn offer_list(State(app): State<AppState>, _: Operator) -> ApiResult<Json<Value>> {
    let offers = app.store.read(offers::list).await?;
    let offers: Vec<Value> = offers.iter().map(offers::Offer::to_json).collect();
    Ok(Json(json!({ "offers": offers })))
}

async fn application_create(State(app): State<AppState>, RawBody(body): RawBody) -> ApiResult<Response> {
    let input = object(&body)?;
    let (keyring, now) = (app.keyring.clone(), app.clock.now_ts());
    let record = app
        .store
        .write(move |conn| applications::create(conn, &keyring, &input, now))
        .await?;
    Ok(created(record))
}

async fn application_read(State(app): State<AppState>, IdPath(id): IdPath) -> ApiResult<Json<Value>> {
    let record = app
        .store
        .read(move |conn| {
            let a = applications::find(conn, &id)?;
            applications::render(conn, &a)
        })
        .await?;
    Ok(Json(record))
}

async fn application_update(
    State(app): State<AppState>,
    IdPath(id): IdPath,
    RawBody(body): RawBody,
) -> ApiResult<Json<Value>> {
    let input = object(&body)?;
    let (keyring, now) = (app.keyring.clone(), app.clock.now_ts());
    let record = app
        .store
        .write(move |conn| applications::update(conn, &keyring, &id, &input, now))
        .await?;
    Ok(Json(record))
}

async fn application_validate(State(app): State<AppState>, IdPath(id): IdPath) -> ApiResult<Json<Value>> {
    let (keyring, now) = (app.keyring.clone(), app.clock.now_ts());
    let report = app
        .store
        .read(move |conn| applications::validate(conn, &keyring, &id, now))
        .await?;
    Ok(Json(report))
}

async fn application_sign(
    State(app): State<AppState>,
    IdPath(id): IdPath,
    RawBody(body): RawBody,
) -> ApiResult<Json<Value>> {
    let input = object(&body)?;
    let (keyring, now) = (app.keyring.clone(), app.clock.now_ts());
    let record = app
        .store
        .write(move |conn| applications::sign(conn, &keyring, &id, &input, now))
        .await?;
    Ok(Json(record))
}

async fn application_list(
    State(app): State<AppState>,
    _: Operator,
    RawQuery(q): RawQuery,
) -> ApiResult<Json<Value>> {
    let mut status = None;
    for (k, v) in query_pairs(q.as_deref()) {
        match k.as_str() {
            "status" if ["draft", "published", "boarded"].contains(&v.as_str()) => status = Some(v),
            "status" => {
                return Err(ApiError::field(
                    "status",
                    "Status must be draft, published or boarded.",
                ))
            }
            other => {
                return Err(ApiError::field(
                    crate::engine::validate::echo_name(other),
                    "Unknown parameter: only status filters applications.",
                ))
            }
        }
    }
    let list = app
        .store
        .read(move |conn| applications::list(conn, status.as_deref()))
        .await?;
    Ok(Json(json!({ "applications": list })))
}
