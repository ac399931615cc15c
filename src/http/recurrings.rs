//! The recurring actions: `skipPayment`, `deferPayment`, `placeOnHold`
//! and `activate` (create, read, list, PUT and DELETE are the generic
//! routes). Each answers the schedule as it now stands; every refusal is
//! a 422 naming what was wrong (see `billing::transitions`).

use super::crud::one;
use super::extract::{query_pairs, IdPath, RawBody};
use super::AppState;
use crate::auth::Caller;
use crate::billing::calendar::local_date;
use crate::billing::{self, transitions};
use crate::engine::{self, query, validate};
use crate::error::{ApiError, ApiResult, FieldErrors};
use crate::resources::RECURRING;
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::post;
use axum::Router;
use serde_json::Value as JsonValue;

#[derive(Clone, Copy, Debug)]
enum Act {
    Skip,
    Defer,
    Hold,
    Activate,
}

impl Act {
    /// The count parameter the action takes.
    fn count_param(self) -> Option<&'static str> {
        match self {
            Act::Skip => Some("skip_count"),
            Act::Defer => Some("defer_count"),
            Act::Hold | Act::Activate => None,
        }
    }
}

pub fn routes() -> Router<AppState> {
    let route = |act: Act| {
        post(
            move |s: State<AppState>, c: Caller, p: IdPath, q: RawQuery, b: RawBody| {
                action(act, s, c, p, q, b)
            },
        )
    };
    Router::new()
        .route("/v2/recurrings/{id}/skipPayment", route(Act::Skip))
        .route("/v2/recurrings/{id}/deferPayment", route(Act::Defer))
        .route("/v2/recurrings/{id}/placeOnHold", route(Act::Hold))
        .route("/v2/recurrings/{id}/activate", route(Act::Activate))
}

/// The count, from the query (`?skip_count=2`) or, for clients that send
/// a body, from `{"skip_count": 2}` or `{"recurring": {"skip_count": 2}}`.
fn count_of(act: Act, pairs: &[(String, String)], body: &[u8]) -> ApiResult<Option<i64>> {
    let mut errors = FieldErrors::new();
    for (k, _) in pairs {
        let known = Some(k.as_str()) == act.count_param()
            || crate::engine::query::CREDENTIAL_PARAMS.contains(&k.as_str());
        if !known {
            let k = validate::echo_name(k);
            errors.add(k.clone(), format!("Unknown parameter '{k}'."));
        }
    }
    errors.into_result()?;
    let Some(param) = act.count_param() else {
        return Ok(None);
    };
    let mut raw = pairs.iter().find(|(k, _)| k == param).map(|(_, v)| v.clone());
    if raw.is_none() && !body.iter().all(u8::is_ascii_whitespace) {
        let value: JsonValue = super::json_body::parse(body)?;
        let found = value
            .get(param)
            .or_else(|| value.get("recurring").and_then(|r| r.get(param)));
        raw = match found {
            Some(JsonValue::Number(n)) => Some(n.to_string()),
            Some(JsonValue::String(s)) => Some(s.clone()),
            _ => None,
        };
    }
    transitions::parse_count(param, raw.as_deref()).map(Some)
}

async fn action(
    act: Act,
    State(app): State<AppState>,
    caller: Caller,
    IdPath(id): IdPath,
    RawQuery(q): RawQuery,
    RawBody(body): RawBody,
) -> ApiResult<Response> {
    caller.perms.require(&RECURRING.permission("update"))?;
    let count = count_of(act, &query_pairs(q.as_deref()), &body)?;
    let cx = app.cx(&caller);
    let cx2 = cx.clone();
    let record = app
        .store
        .write(move |conn| {
            let old = query::find(conn, &RECURRING, &cx2.scope, &id)?
                .ok_or_else(|| ApiError::not_found(RECURRING.name))?;
            billing::refuse_while_running(conn, old.id())?;
            let (tz, _) = billing::location_zone(conn, old.text("location_id").unwrap_or_default())?;
            let today = local_date(cx2.now, tz);
            let new = match (act, count) {
                (Act::Hold, _) => transitions::place_on_hold(&old)?,
                (Act::Activate, _) => transitions::activate(&old, today)?,
                (Act::Skip, Some(k)) => transitions::skip(&old, k)?,
                (Act::Defer, Some(k)) => transitions::defer(&old, k)?,
                (_, None) => return Err(ApiError::internal("a count action without its count")),
            };
            let new = engine::save_record(&cx2, conn, &old, new)?;
            billing::after_change(conn, &new, Some(&old))?;
            Ok(new)
        })
        .await?;
    app.schedules.wake();
    Ok(one(
        &RECURRING,
        StatusCode::OK,
        JsonValue::Object(engine::render(&cx, &record)),
    ))
}
