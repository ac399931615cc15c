//! `/v2/terminals`: the generic routes, with a create of its own that
//! hands the new terminal's device secret to the caller, once (ADR 0018).

use super::crud::{self, Verbs};
use super::extract::{envelope, RawBody};
use super::AppState;
use crate::auth::Caller;
use crate::engine::{self, validate};
use crate::error::{ApiError, ApiResult};
use crate::resources::TERMINAL;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::post;
use axum::Router;
use serde_json::Value as Json;

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
    out.insert(SECRET_MEMBER.into(), Json::String(secret));
    if let Some(links) = links {
        out.insert("_links".into(), links);
    }
    Ok(crud::one(&TERMINAL, StatusCode::CREATED, Json::Object(out)))
}
