//! The token method of authentication: `POST /v2/token` signs a user in
//! with username and password, `DELETE /v2/token/{token}` signs out; the
//! token then authenticates as the `access-token` header or query
//! parameter (see `sessions`).

use super::extract::RawBody;
use super::ratelimit::ClientAddr;
use super::AppState;
use crate::auth::{Caller, Session};
use crate::error::{ApiError, ApiResult, FieldErrors};
use crate::sessions::{self, NameLock, IDLE_SECONDS};
use axum::extract::{Path, RawQuery, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, post};
use axum::{Extension, Router};
use serde_json::Value as Json;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v2/token", post(sign_in))
        .route("/v2/token/{token}", delete(sign_out))
}

/// The sign-in body: `{username, password, domain}`, bare as the reference
/// sends it or wrapped in `{"token": {...}}`. What is wrong with its form
/// (missing, not a string, too long) is named; whether the name or the
/// password is wrong is not (a 401 for both).
fn sign_in_body(raw: &[u8]) -> ApiResult<(String, String)> {
    let Json::Object(body) = super::json_body::parse(raw)? else {
        return Err(ApiError::BadRequest(
            "The request body must be a JSON object.".into(),
        ));
    };
    let body = match body.get("token") {
        Some(Json::Object(inner)) if body.len() == 1 => inner.clone(),
        _ => body,
    };
    let mut errors = FieldErrors::new();
    let mut text = |name: &str| {
        let label = crate::engine::validate::label(name);
        let problem = match body.get(name) {
            Some(Json::String(s)) if s.chars().count() > MAX_SIGN_IN_TEXT => {
                format!("{label} must have at most {MAX_SIGN_IN_TEXT} characters.")
            }
            Some(Json::String(s)) if !s.trim().is_empty() => return Some(s.clone()),
            None | Some(Json::Null) | Some(Json::String(_)) => format!("{label} cannot be blank."),
            Some(_) => format!("{label} must be a string."),
        };
        errors.add(name, problem);
        None
    };
    let username = text("username");
    let password = text("password");
    // The branded host the user signs in through; every host serves every
    // user here, so it is required (as in the reference) but not matched.
    let _domain = text("domain");
    for key in body.keys() {
        if !["username", "password", "domain"].contains(&key.as_str()) {
            let key = crate::engine::validate::echo_name(key);
            errors.add(key.clone(), format!("Unknown field {key} for token."));
        }
    }
    errors.into_result()?;
    Ok((username.unwrap_or_default(), password.unwrap_or_default()))
}

/// The longest username, password or domain a sign-in reads.
const MAX_SIGN_IN_TEXT: usize = 256;

/// The developer-id of a sign-in, required as on every request (header or
/// query parameter): missing or malformed is a 401 before anything else.
fn developer_id(headers: &HeaderMap, query: Option<&str>) -> ApiResult<String> {
    let pairs = super::extract::query_pairs(query);
    match super::extract::header_or_query(headers, &pairs, "developer-id") {
        Some(id) if crate::ids::looks_like_id(&id) => Ok(id),
        Some(_) => Err(ApiError::Unauthorized("Invalid developer-id.".into())),
        None => Err(ApiError::Unauthorized(
            "Authentication required: send developer-id (header or query parameter).".into(),
        )),
    }
}

async fn sign_in(
    State(app): State<AppState>,
    address: Option<Extension<ClientAddr>>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
    RawBody(raw): RawBody,
) -> ApiResult<Response> {
    let ip = address.map(|Extension(ClientAddr(ip))| ip);
    if let Some(ip) = ip {
        app.rate_limits
            .sign_in_attempt(ip)
            .map_err(ApiError::TooManyRequests)?;
    }
    let developer_id = developer_id(&headers, query.as_deref())?;
    let (username, password) = sign_in_body(&raw)?;
    let clock = app.clock.clone();
    let (developer_known, account, lock) = app
        .store
        .read(move |conn| {
            let known = crate::auth::developer_exists(conn, &developer_id)?;
            let account = sessions::account(conn, &clock, &username)?;
            // Counted per name, found or not: the lock must not tell.
            let lock = NameLock::of_sign_in(&username, account.as_ref(), &clock);
            Ok((known, account, lock))
        })
        .await?;
    if !developer_known {
        return Err(ApiError::Unauthorized("Invalid developer-id.".into()));
    }
    // Counted before the password is checked: guesses sent at once are
    // counted one by one, and those past the lock never reach argon2.
    let counting = lock.clone();
    if let Err(wait) = app.store.write(move |conn| counting.count_attempt(conn)).await? {
        if let Some(ip) = ip {
            app.rate_limits.sign_in_not_a_failure(ip);
        }
        return Err(ApiError::TooManyRequests(wait as u64));
    }
    // The hash is checked off the async workers (argon2 takes tens of
    // milliseconds by design); an unknown user is checked against a decoy
    // so both take as long.
    let stored = account
        .as_ref()
        .and_then(|a| a.password_hash.clone())
        .unwrap_or_else(|| crate::passwords::decoy().to_string());
    let matches = tokio::task::spawn_blocking(move || crate::passwords::verify(&password, &stored))
        .await
        .map_err(ApiError::internal)?;
    let account = match account {
        Some(a) if matches && a.active && a.password_hash.is_some() => a,
        _ => {
            app.store.write(move |conn| lock.show_failure(conn)).await?;
            return Err(ApiError::Unauthorized("Invalid username or password.".into()));
        }
    };
    if let Some(ip) = ip {
        app.rate_limits.sign_in_not_a_failure(ip);
    }
    let answer = app
        .store
        .write(move |conn| {
            lock.clear(conn)?;
            sessions::open(conn, &account, ip)
        })
        .await?;
    Ok((StatusCode::CREATED, axum::Json(answer)).into_response())
}

/// Ends a session by its token (the token is the proof, so no other
/// credential is asked for: signing out must always be possible): 204, or
/// 404 when there is no such session or it has expired.
async fn sign_out(State(app): State<AppState>, Path(token): Path<String>) -> ApiResult<Response> {
    if token.len() > 128 {
        return Err(ApiError::not_found("token"));
    }
    let clock = app.clock.clone();
    if app
        .store
        .write(move |conn| sessions::close(conn, &token, &clock))
        .await?
    {
        Ok(StatusCode::NO_CONTENT.into_response())
    } else {
        Err(ApiError::not_found("token"))
    }
}

/// What a session with a one-time password may do: read its own user and
/// set its own password.
pub fn allowed_before_new_password(parts: &Parts, caller: &Caller) -> bool {
    let path = parts.uri.path().trim_end_matches('/');
    let own = format!("/v2/users/{}", caller.user_id);
    (parts.method == Method::GET && (path == "/v2/users/me" || path == own))
        || (parts.method == Method::PUT && path == own)
}

/// Starts the session's idle time again; written at most every 30
/// seconds of use.
pub async fn keep_alive(app: &AppState, caller: &Caller, session: &Session) -> ApiResult<()> {
    let expires = app.clock.location_now(caller.clock_offset_s) + IDLE_SECONDS;
    if expires - session.expires_ts < 30 {
        return Ok(());
    }
    let hash = session.token_hash.clone();
    app.store
        .write(move |conn| sessions::touch(conn, &hash, expires))
        .await
}
