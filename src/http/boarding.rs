//! The boarding API v1 (`boarding`): the public offer and application
//! endpoints a prospective merchant's form calls, and the operators'
//! offer administration behind a bearer token. See README, "Boarding API".

use super::extract::{query_pairs, IdPath, RawBody};
use super::AppState;
use crate::boarding::{applications, offers, operators};
use crate::error::{ApiError, ApiResult};
use axum::extract::{FromRequestParts, RawQuery, State};
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
            .and_then(bearer_token)
            .map(str::to_string);
        state
            .store
            .read(move |conn| operators::authenticate(conn, token.as_deref()))
            .await?;
        Ok(Operator)
    }
}

/// The token of an `Authorization: Bearer <token>` value. The scheme is
/// matched in any case, as RFC 7235 says of authentication schemes.
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim_start().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
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

async fn offer_by_vanity(State(app): State<AppState>, IdPath(vanity): IdPath) -> ApiResult<Json<Value>> {
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

/// Which page of an operator's list: `page` (from 1) and `page_size` (1
/// to 100, default 20), as v2 lists take them.
struct Paging {
    page: u64,
    size: u64,
}

impl Paging {
    const DEFAULT_SIZE: u64 = 20;

    fn new() -> Paging {
        Paging {
            page: 1,
            size: Self::DEFAULT_SIZE,
        }
    }

    /// Takes `key=value` when it is a paging parameter (true), refusing
    /// a bad value.
    fn take(&mut self, key: &str, value: &str) -> ApiResult<bool> {
        let max = crate::engine::query::MAX_PAGE_SIZE;
        match key {
            "page" => match value.parse::<u64>() {
                Ok(n) if n >= 1 => self.page = n,
                _ => return Err(ApiError::field("page", "Page must be an integer of at least 1.")),
            },
            "page_size" => match value.parse::<u64>() {
                Ok(n) if (1..=max).contains(&n) => self.size = n,
                _ => {
                    return Err(ApiError::field(
                        "page_size",
                        format!("Page Size must be an integer from 1 to {max}."),
                    ))
                }
            },
            _ => return Ok(false),
        }
        Ok(true)
    }

    fn offset(&self) -> u64 {
        (self.page - 1).saturating_mul(self.size)
    }

    /// The list's `meta`, as v2 lists answer it (newest first).
    fn meta(&self, app: &AppState, path: &str, raw: &[(String, String)], total: u64) -> Value {
        json!({
            "pagination": crate::engine::pagination(&app.public_url, path, raw, self.page, self.size, total),
            "sort": { "attributes": { "createdAt": "desc" } },
        })
    }
}

async fn offer_list(
    State(app): State<AppState>,
    _: Operator,
    RawQuery(q): RawQuery,
) -> ApiResult<Json<Value>> {
    let pairs = query_pairs(q.as_deref());
    let mut paging = Paging::new();
    for (k, v) in &pairs {
        if !paging.take(k, v)? {
            return Err(ApiError::field(
                crate::engine::validate::echo_name(k),
                "Unknown parameter: offers take only page and page_size.",
            ));
        }
    }
    let (offset, limit) = (paging.offset(), paging.size);
    let (offers, total) = app
        .store
        .read(move |conn| offers::page(conn, offset, limit))
        .await?;
    let offers: Vec<Value> = offers.iter().map(offers::Offer::to_json).collect();
    let meta = paging.meta(&app, "/v1/offers", &pairs, total);
    Ok(Json(json!({ "offers": offers, "meta": meta })))
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
    let pairs = query_pairs(q.as_deref());
    let mut status = None;
    let mut paging = Paging::new();
    for (k, v) in &pairs {
        match k.as_str() {
            "status" if ["draft", "published", "boarded"].contains(&v.as_str()) => status = Some(v.clone()),
            "status" => {
                return Err(ApiError::field(
                    "status",
                    "Status must be draft, published or boarded.",
                ))
            }
            other if paging.take(other, v)? => {}
            other => {
                return Err(ApiError::field(
                    crate::engine::validate::echo_name(other),
                    "Unknown parameter: only status filters applications (and page, page_size page them).",
                ))
            }
        }
    }
    let (offset, limit) = (paging.offset(), paging.size);
    let (list, total) = app
        .store
        .read(move |conn| applications::list(conn, status.as_deref(), offset, limit))
        .await?;
    let meta = paging.meta(&app, "/v1/applications", &pairs, total);
    Ok(Json(json!({ "applications": list, "meta": meta })))
}

/// The OpenAPI path items of the boarding API (merged into
/// `/v2/openapi.json`), the answer groups derived from their declarations.
pub fn openapi_paths(error: &Value, errors: &Value) -> Vec<(String, Value)> {
    use crate::boarding::answers::{Kind, GROUPS};
    let reply = |d: &str, schema: Value| json!({ "description": d, "content": { "application/json": { "schema": schema } } });
    let body =
        |schema: Value| json!({ "required": true, "content": { "application/json": { "schema": schema } } });
    let groups: Map<String, Value> = GROUPS
        .iter()
        .map(|g| {
            let fields: Map<String, Value> = g
                .fields
                .iter()
                .map(|f| {
                    let schema = match f.kind {
                        Kind::Equity => json!({ "type": "number", "minimum": 0, "exclusiveMinimum": true,
                            "maximum": 100, "exclusiveMaximum": true, "multipleOf": 0.01 }),
                        Kind::Flag => json!({ "type": "boolean" }),
                        Kind::Sales => json!({ "type": "string",
                            "description": "amount up to 999999999.99 (number or string), or a range LOW-HIGH / >N" }),
                        _ => json!({ "type": "string" }),
                    };
                    (f.name.to_string(), schema)
                })
                .collect();
            (g.name.to_string(), json!({ "type": "object", "properties": fields }))
        })
        .collect();
    let answers = json!({ "type": "object", "properties": groups,
        "description": "answer groups; blank or omitted answers are erased by a PUT" });
    let application = json!({ "type": "object", "properties": {
        "applicationId": { "type": "string" }, "verticalPresetId": { "type": "string", "nullable": true },
        "offerId": { "type": "string" }, "userId": { "type": "string" },
        "status": { "type": "string", "enum": ["draft", "published", "boarded"] }, "source": { "type": "string" },
        "createdAt": { "type": "string" }, "modifiedAt": { "type": "string" },
        "publishedAt": { "type": "string", "nullable": true }, "locationId": { "type": "string", "nullable": true },
        "answers": answers.clone(), "signature": { "type": "object", "nullable": true } } });
    let offer = json!({ "type": "object", "properties": {
        "offerId": { "type": "string" }, "name": { "type": "string" }, "vanityUrl": { "type": "string" },
        "verticalName": { "type": "string" }, "partnerId": { "type": "string" }, "verticalPresetId": { "type": "string" },
        "pricingBundleId": { "type": "string" }, "vanityDomain": { "type": "string" },
        "presentationalState": { "type": "object" },
        "keysAllowable": { "type": "array", "items": { "type": "string" } },
        "keysDefaultValue": { "type": "object" }, "keysFixedValue": { "type": "object" },
        "keysRequiredValue": { "type": "array", "items": { "type": "string" } },
        "isActive": { "type": "boolean" }, "isPublished": { "type": "boolean" },
        "publishedAt": { "type": "string" }, "createdAt": { "type": "string" } } });
    let public = json!([]);
    let operator = json!([{ "operator-token": [] }]);
    let id = |name: &str| json!([{ "name": name, "in": "path", "required": true, "schema": { "type": "string" } }]);
    let fails = json!({
        "400": reply("malformed JSON, or a body that is not an object", error.clone()),
        "404": reply("no such record", error.clone()),
        "409": reply("the application is no longer a draft (or the vanity url is taken)", errors.clone()),
        "415": reply("a body that is not JSON", error.clone()),
        "422": reply("validation failed, each problem under its dotted path", errors.clone()),
    });
    let with = |ok: Value| {
        let mut r = fails.clone();
        if let (Value::Object(r), Value::Object(ok)) = (&mut r, ok) {
            r.extend(ok);
        }
        r
    };
    let denied = json!({ "401": reply("missing or wrong operator token", error.clone()) });
    let op = |ok: Value| {
        let mut r = with(ok);
        if let (Value::Object(r), Value::Object(d)) = (&mut r, denied.clone()) {
            r.extend(d);
        }
        r
    };
    let paging = json!([
        { "name": "page", "in": "query", "schema": { "type": "integer", "minimum": 1 },
          "description": "the page, from 1 (meta.pagination.currentPage counts from 0)" },
        { "name": "page_size", "in": "query",
          "schema": { "type": "integer", "minimum": 1, "maximum": crate::engine::query::MAX_PAGE_SIZE, "default": 20 } },
    ]);
    let meta = json!({ "type": "object", "description": "pagination (links, totalCount, pageCount, currentPage, perPage) and sort, as v2 lists" });
    let mut application_params = json!([{ "name": "status", "in": "query",
        "schema": { "type": "string", "enum": ["draft", "published", "boarded"] } }]);
    if let (Value::Array(list), Value::Array(more)) = (&mut application_params, paging.clone()) {
        list.extend(more);
    }
    vec![
        (
            "/v1/offer/vanityurl/{vanityUrl}".into(),
            json!({ "get": { "summary": "An open offer by its vanity url",
            "tags": ["boarding"], "security": public, "parameters": id("vanityUrl"),
            "responses": with(json!({ "200": reply("the offer record", offer.clone()) })) } }),
        ),
        (
            "/v1/offer".into(),
            json!({ "post": { "summary": "Create an offer (operator)", "tags": ["boarding"],
            "security": operator, "requestBody": body(offer.clone()),
            "responses": op(json!({ "201": reply("the offer record", offer.clone()) })) } }),
        ),
        (
            "/v1/offer/{offerId}".into(),
            json!({ "parameters": id("offerId"),
            "get": { "summary": "Read an offer (operator)", "tags": ["boarding"], "security": operator,
                "responses": op(json!({ "200": reply("the offer record", offer.clone()) })) },
            "put": { "summary": "Change an offer's members given (operator)", "tags": ["boarding"], "security": operator,
                "requestBody": body(offer.clone()),
                "responses": op(json!({ "200": reply("the offer record", offer.clone()) })) } }),
        ),
        (
            "/v1/offers".into(),
            json!({ "get": { "summary": "Offers, newest first, a page at a time (operator)", "tags": ["boarding"],
            "security": operator, "parameters": paging,
            "responses": op(json!({ "200": reply("the offers",
                json!({ "type": "object", "properties": { "offers": { "type": "array", "items": offer },
                    "meta": meta.clone() } })) })) } }),
        ),
        (
            "/v1/application".into(),
            json!({ "post": { "summary": "Create an application to an open offer",
            "tags": ["boarding"], "security": public,
            "requestBody": body(json!({ "type": "object", "required": ["offerId", "userId"], "properties": {
                "offerId": { "type": "string" }, "userId": { "type": "string" }, "answers": answers.clone() } })),
            "responses": with(json!({ "201": reply("the application record", application.clone()) })) } }),
        ),
        (
            "/v1/application/{applicationId}".into(),
            json!({ "parameters": id("applicationId"),
            "get": { "summary": "Read an application (sensitive answers masked)", "tags": ["boarding"], "security": public,
                "responses": with(json!({ "200": reply("the application record", application.clone()) })) },
            "put": { "summary": "Resubmit every answer of a draft (groups at the top level)", "tags": ["boarding"],
                "security": public, "requestBody": body(answers),
                "responses": with(json!({ "200": reply("the application record", application.clone()) })) } }),
        ),
        (
            "/v1/application/{applicationId}/validate".into(),
            json!({ "get": {
            "summary": "Every missing or invalid answer", "tags": ["boarding"], "security": public,
            "parameters": id("applicationId"),
            "responses": with(json!({ "200": reply("the report", json!({ "type": "object", "properties": {
                "applicationId": { "type": "string" }, "status": { "type": "string" }, "valid": { "type": "boolean" },
                "errors": { "type": "object" } } })) })) } }),
        ),
        (
            "/v1/application/{applicationId}/signature".into(),
            json!({ "post": {
            "summary": "Sign and publish a valid draft", "tags": ["boarding"], "security": public,
            "parameters": id("applicationId"),
            "requestBody": body(json!({ "type": "object", "required": ["eConsent", "name", "ipAddress", "timestamp"],
                "properties": { "eConsent": { "type": "boolean" }, "name": { "type": "string" },
                    "ipAddress": { "type": "string", "description": "a public IPv4 or IPv6 address" },
                    "timestamp": { "type": "string", "format": "date-time",
                        "description": "not in the future, nor more than a day before the application was created" } } })),
            "responses": with(json!({ "200": reply("the published application", application.clone()) })) } }),
        ),
        (
            "/v1/applications".into(),
            json!({ "get": { "summary": "Applications, newest first, a page at a time (operator)",
            "tags": ["boarding"], "security": operator,
            "parameters": application_params,
            "responses": op(json!({ "200": reply("the applications", json!({ "type": "object", "properties": {
                "applications": { "type": "array", "items": application }, "meta": meta } })) })) } }),
        ),
    ]
}
