//! Request parsing at the edge: credentials, the JSON envelope and query
//! pairs. Malformed input becomes our JSON errors, never axum's text.

use super::AppState;
use crate::auth::{Caller, Credentials};
use crate::engine::Cx;
use crate::error::{ApiError, ApiResult};
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::HeaderMap;
use base64::Engine;
use serde_json::{Map, Value as Json};

/// Query string as ordered pairs (a repeated key keeps every value).
pub fn query_pairs(query: Option<&str>) -> Vec<(String, String)> {
    form_urlencoded::parse(query.unwrap_or("").as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

fn header(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// A credential from its header, else from the query parameter of the
/// same name; blank counts as absent.
pub fn header_or_query(headers: &HeaderMap, pairs: &[(String, String)], name: &str) -> Option<String> {
    header(headers, name).or_else(|| {
        pairs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .filter(|v| !v.is_empty())
    })
}

/// Headers first, then query parameters, then HTTP Basic (user id and
/// api key); developer-id always comes from a header or the query.
pub fn credentials(parts: &Parts) -> Credentials {
    let pairs = query_pairs(parts.uri.query());
    let get = |name: &str| header_or_query(&parts.headers, &pairs, name);
    let mut creds = Credentials {
        developer_id: get("developer-id"),
        user_id: get("user-id"),
        api_key: get("user-api-key"),
        access_token: get("access-token"),
    };
    if creds.user_id.is_none() || creds.api_key.is_none() {
        if let Some((user, key)) = basic(&parts.headers) {
            creds.user_id = Some(user);
            creds.api_key = Some(key);
        }
    }
    creds
}

fn basic(headers: &HeaderMap) -> Option<(String, String)> {
    let value = header(headers, "authorization")?;
    let encoded = value
        .strip_prefix("Basic ")
        .or_else(|| value.strip_prefix("basic "))?;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (user, key) = text.split_once(':')?;
    Some((user.to_string(), key.to_string()))
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let creds = credentials(parts);
        let clock = state.clock.clone();
        let caller = state.callers.authenticate(&state.store, creds, &clock).await?;
        if let Some(session) = &caller.session {
            if session.must_change_password && !super::tokens::allowed_before_new_password(parts, &caller) {
                return Err(ApiError::Forbidden(
                    "A new password is required: set your own with PUT /v2/users/{id} (password and old_password)."
                        .into(),
                ));
            }
            super::tokens::keep_alive(state, &caller, session).await?;
        }
        tracing::Span::current().record("user_id", caller.user_id.as_str());
        state
            .rate_limits
            .user(&caller.user_id)
            .map_err(ApiError::TooManyRequests)?;
        Ok(caller)
    }
}

impl AppState {
    /// The operation context of an authenticated caller.
    pub fn cx(&self, caller: &Caller) -> Cx {
        Cx {
            user_id: caller.user_id.clone(),
            scope: caller.scope.clone(),
            now: self.clock.location_now(caller.clock_offset_s),
            outbound: self.outbound,
            keyring: self.keyring.clone(),
            public_url: self.public_url.clone(),
            perms: std::sync::Arc::new(caller.perms.clone()),
            sink: self.sink.clone(),
            user_receipts: Some(caller.receipts_to.clone()),
            epoch: caller.epoch,
        }
    }
}

/// Parses `{"<key>": {...}}` and returns the inner object.
pub fn envelope(body: &[u8], key: &str) -> ApiResult<Map<String, Json>> {
    if body.iter().all(|b| b.is_ascii_whitespace()) {
        return Err(ApiError::BadRequest(format!(
            "A JSON body of the form {{\"{key}\": {{...}}}} is required."
        )));
    }
    let value: Json = super::json_body::parse(body)?;
    let Json::Object(mut outer) = value else {
        return Err(ApiError::BadRequest(
            "The request body must be a JSON object.".into(),
        ));
    };
    let label = crate::engine::validate::label(key);
    let inner = match outer.remove(key) {
        Some(Json::Object(inner)) => inner,
        Some(_) => return Err(ApiError::field(key, format!("{label} must be an object."))),
        None => {
            return Err(ApiError::field(
                key,
                format!("{label} cannot be blank: send the record inside it, as {{\"{key}\": {{...}}}}."),
            ))
        }
    };
    if let Some(other) = outer.keys().next() {
        let other = crate::engine::validate::echo_name(other);
        return Err(ApiError::field(
            other.clone(),
            format!("Unknown member {other}: the body holds only {key}."),
        ));
    }
    Ok(inner)
}

/// The raw request body; axum's rejections become our JSON errors.
pub struct RawBody(pub axum::body::Bytes);

impl<S: Send + Sync> axum::extract::FromRequest<S> for RawBody {
    type Rejection = ApiError;

    async fn from_request(req: axum::extract::Request, state: &S) -> Result<Self, Self::Rejection> {
        // Bodies are JSON: a body declared as something else (a form,
        // text/plain, XML) is refused rather than read as JSON; without a
        // content type it is read as JSON. The body is read first either
        // way, so the client is never cut off mid-upload.
        let content_type = req
            .headers()
            .get(axum::http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase();
        let body = tokio::time::timeout(
            crate::server::body_timeout(),
            axum::body::Bytes::from_request(req, state),
        )
        .await
        .map_err(|_| ApiError::RequestTimeout)?
        .map_err(|e| super::body_rejection(e.status()))?;
        if !is_json_type(&content_type) {
            return Err(ApiError::UnsupportedMediaType);
        }
        Ok(RawBody(body))
    }
}

/// Whether a Content-Type (lowercased) declares JSON, or declares nothing:
/// `application/json`, `application/<x>+json`, `text/json`, with any
/// parameters (`; charset=utf-8`).
fn is_json_type(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or("").trim();
    essence.is_empty()
        || essence == "application/json"
        || essence == "text/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// The `{id}` of a record path.
pub struct IdPath(pub String);

impl<S: Send + Sync> FromRequestParts<S> for IdPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        axum::extract::Path::<String>::from_request_parts(parts, state)
            .await
            .map(|p| IdPath(p.0))
            .map_err(|_| ApiError::NotFound("No such record.".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_content_types() {
        for yes in [
            "",
            "application/json",
            "application/json; charset=utf-8",
            "application/merge-patch+json",
            "text/json",
        ] {
            assert!(is_json_type(yes), "{yes}");
        }
        for no in [
            "text/plain",
            "application/xml",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "application/jsonx",
        ] {
            assert!(!is_json_type(no), "{no}");
        }
    }

    #[test]
    fn envelope_errors() {
        assert!(matches!(envelope(b"", "contact"), Err(ApiError::BadRequest(_))));
        assert!(matches!(envelope(b"{", "contact"), Err(ApiError::BadRequest(_))));
        assert!(matches!(
            envelope(b"[1]", "contact"),
            Err(ApiError::BadRequest(_))
        ));
        assert!(matches!(envelope(b"{}", "contact"), Err(ApiError::Validation(_))));
        assert!(matches!(
            envelope(b"{\"contact\":1}", "contact"),
            Err(ApiError::Validation(_))
        ));
        assert!(envelope(b"{\"contact\":{}}", "contact").unwrap().is_empty());
    }
}
