//! The one error type of the API. Validation errors render the spec's
//! `{errors:{field:[message]}}`; every other error renders
//! `{status, name, message}`. Internals are logged, never returned.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Map, Value as Json};
use std::collections::BTreeMap;

/// Field name -> messages, in a stable order.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct FieldErrors(pub BTreeMap<String, Vec<String>>);

impl FieldErrors {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn add(&mut self, field: impl Into<String>, message: impl Into<String>) {
        let messages = self.0.entry(field.into()).or_default();
        let message = message.into();
        if !messages.contains(&message) {
            messages.push(message);
        }
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub fn has(&self, field: &str) -> bool {
        self.0.contains_key(field)
    }
    /// `Ok(())` when nothing was collected, else a 422.
    pub fn into_result(self) -> Result<(), ApiError> {
        if self.is_empty() {
            Ok(())
        } else {
            Err(ApiError::Validation(self))
        }
    }
    pub fn to_json(&self) -> Json {
        let mut map = Map::new();
        for (field, messages) in &self.0 {
            map.insert(field.clone(), json!(messages));
        }
        Json::Object(map)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("validation failed")]
    Validation(FieldErrors),
    /// A 422 whose `errors` nest (Level 3: `level3_data[].line_items[]`).
    #[error("validation failed")]
    NestedValidation(Json),
    /// A validation-shaped body with another status (location delete: 409).
    #[error("conflict")]
    Conflict(FieldErrors),
    #[error("bad request: {0}")]
    BadRequest(String),
    #[error("unauthorized: {0}")]
    Unauthorized(String),
    #[error("forbidden: {0}")]
    Forbidden(String),
    #[error("not found")]
    NotFound(String),
    #[error("method not allowed")]
    MethodNotAllowed,
    #[error("payload too large")]
    PayloadTooLarge,
    #[error("unsupported media type")]
    UnsupportedMediaType,
    #[error("service unavailable: {0}")]
    Unavailable(String),
    /// Anything that is our fault. The text is logged, never sent.
    #[error("internal error: {0}")]
    Internal(String),
}

impl ApiError {
    pub fn field(field: impl Into<String>, message: impl Into<String>) -> Self {
        let mut errors = FieldErrors::new();
        errors.add(field, message);
        ApiError::Validation(errors)
    }
    pub fn not_found(what: &str) -> Self {
        ApiError::NotFound(format!("{what} not found"))
    }
    pub fn internal(e: impl std::fmt::Display) -> Self {
        ApiError::Internal(e.to_string())
    }
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::Validation(_) | ApiError::NestedValidation(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
    /// The JSON body, without the request id (the middleware adds it).
    pub fn body(&self) -> Json {
        let status = self.status();
        match self {
            ApiError::Validation(errors) | ApiError::Conflict(errors) => {
                json!({ "errors": errors.to_json() })
            }
            ApiError::NestedValidation(errors) => json!({ "errors": errors }),
            other => {
                let message = match other {
                    ApiError::BadRequest(m)
                    | ApiError::Unauthorized(m)
                    | ApiError::Forbidden(m)
                    | ApiError::NotFound(m)
                    | ApiError::Unavailable(m) => m.clone(),
                    ApiError::MethodNotAllowed => "Method not allowed on this endpoint.".into(),
                    ApiError::PayloadTooLarge => "Request body is too large.".into(),
                    ApiError::UnsupportedMediaType => {
                        "Send the body as JSON (Content-Type: application/json).".into()
                    }
                    _ => "An internal error occurred. Quote the request_id when reporting it.".into(),
                };
                json!({
                    "status": status.as_u16(),
                    "name": status.canonical_reason().unwrap_or("Error"),
                    "message": message,
                })
            }
        }
    }
}

tokio::task_local! {
    /// The id of the request being served, set by the HTTP middleware.
    pub static REQUEST_ID: String;
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if let ApiError::Internal(detail) = &self {
            tracing::error!(error = %detail, "internal error");
        }
        let status = self.status();
        let mut body = self.body();
        if let (Json::Object(map), Ok(id)) = (&mut body, REQUEST_ID.try_with(|id| id.clone())) {
            map.insert("request_id".into(), Json::String(id));
        }
        let mut response = (status, axum::Json(body)).into_response();
        if status == StatusCode::UNAUTHORIZED {
            // RFC 9110: a 401 names a scheme; HTTP Basic is one we accept.
            response.headers_mut().insert(
                axum::http::header::WWW_AUTHENTICATE,
                axum::http::HeaderValue::from_static("Basic realm=\"ferrogate\""),
            );
        }
        response
    }
}

pub type ApiResult<T> = Result<T, ApiError>;
