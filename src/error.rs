//! The one error type of the API. Validation errors render the spec's
//! `{errors:{field:[message]}}`; every other error renders
//! `{status, name, message}`. Internals are logged, never returned: an
//! [`Internal`] error keeps where it was made and what caused it for the
//! log line, and its body says only "an internal error occurred".

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Map, Value as Json};
use std::collections::BTreeMap;
use std::error::Error as StdError;
use std::fmt;
use std::panic::Location;

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
    /// Over a rate limit: retry after this many seconds.
    #[error("too many requests")]
    TooManyRequests(u64),
    /// The body did not arrive within the time allowed.
    #[error("request timeout")]
    RequestTimeout,
    #[error("service unavailable: {0}")]
    Unavailable(String),
    /// This node is at a limit of its own (as many list exports as it
    /// runs at once): 503 with the message and `Retry-After` seconds.
    #[error("busy: {message}")]
    Busy { message: String, retry_after: u64 },
    /// A terminal could not do what a router request asked: offline (503),
    /// busy (409), or the request ended on the device without a payment
    /// (422). Rendered `{errors: {terminal_id: [message]}, terminal_result:
    /// code}` so a client can branch on the code (ADR 0020).
    #[error("terminal: {message}")]
    Terminal {
        status: StatusCode,
        code: &'static str,
        message: String,
    },
    /// An answer another node made for this request (the router hands
    /// terminal requests between nodes), rendered as it came.
    #[error("answer relayed from another node ({0})")]
    Relayed(StatusCode, Json),
    /// Anything that is our fault. Logged with its origin, never sent.
    /// Made with [`ApiError::internal`].
    #[error("internal error: {0}")]
    Internal(Internal),
}

/// What went wrong inside, for the log: the error (a message or the error
/// value itself, so its `source()` chain survives) and the place in our
/// code that turned it into an API error.
pub struct Internal {
    error: Box<dyn StdError + Send + Sync>,
    location: &'static Location<'static>,
}

impl Internal {
    /// Where in our code the error was made (`file:line:column`).
    pub fn location(&self) -> &'static Location<'static> {
        self.location
    }

    /// The error's causes, outermost first, without the error itself.
    pub fn causes(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut source = self.error.source();
        while let Some(cause) = source {
            out.push(cause.to_string());
            source = cause.source();
        }
        out
    }

    /// Writes the one log line of an internal error. The request id comes
    /// from the request's span.
    fn log(&self) {
        let causes = self.causes();
        if causes.is_empty() {
            tracing::error!(error = %self.error, origin = %self.location, "internal error");
        } else {
            let causes = causes.join(": ");
            tracing::error!(error = %self.error, causes = %causes, origin = %self.location, "internal error");
        }
    }
}

/// The error's own message (what `ApiError`'s `Display` shows).
impl fmt::Display for Internal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.error, f)
    }
}

impl fmt::Debug for Internal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Internal")
            .field("error", &self.error)
            .field("location", &format_args!("{}", self.location))
            .finish()
    }
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
    /// An internal error made here (the caller's location is kept): from a
    /// message (`&str`, `String`) or from an error, whose causes are kept.
    #[track_caller]
    pub fn internal(e: impl Into<Box<dyn StdError + Send + Sync>>) -> Self {
        ApiError::Internal(Internal {
            error: e.into(),
            location: Location::caller(),
        })
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
            ApiError::RequestTimeout => StatusCode::REQUEST_TIMEOUT,
            ApiError::TooManyRequests(_) => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Unavailable(_) | ApiError::Busy { .. } => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Terminal { status, .. } | ApiError::Relayed(status, _) => *status,
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
            ApiError::Terminal { code, message, .. } => {
                json!({ "errors": { "terminal_id": [message] }, "terminal_result": code })
            }
            ApiError::Relayed(_, body) => body.clone(),
            other => {
                let message = match other {
                    ApiError::BadRequest(m)
                    | ApiError::Unauthorized(m)
                    | ApiError::Forbidden(m)
                    | ApiError::NotFound(m)
                    | ApiError::Unavailable(m)
                    | ApiError::Busy { message: m, .. } => m.clone(),
                    ApiError::MethodNotAllowed => "Method not allowed on this endpoint.".into(),
                    ApiError::PayloadTooLarge => "Request body is too large.".into(),
                    ApiError::UnsupportedMediaType => {
                        "Send the body as JSON (Content-Type: application/json).".into()
                    }
                    ApiError::TooManyRequests(wait) => {
                        format!("Too many requests; retry in {wait} second(s).")
                    }
                    ApiError::RequestTimeout => {
                        "The request body did not arrive in time; send it again.".into()
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

/// Puts the id of the request being served into an error body (a body
/// that is not an object, or a call outside a request, is left as it is).
pub fn stamp_request_id(body: &mut Json) {
    if let (Json::Object(map), Ok(id)) = (body, REQUEST_ID.try_with(|id| id.clone())) {
        map.insert("request_id".into(), Json::String(id));
    }
}

/// An answer kept earlier and given again (an idempotent replay): an
/// error among them carries this request's id, like every error body.
pub fn replayed_answer(status: StatusCode, mut body: Json) -> Response {
    if status.is_client_error() || status.is_server_error() {
        stamp_request_id(&mut body);
    }
    (status, axum::Json(body)).into_response()
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if let ApiError::Internal(internal) = &self {
            internal.log();
        }
        let status = self.status();
        let mut body = self.body();
        stamp_request_id(&mut body);
        let mut response = (status, axum::Json(body)).into_response();
        if let ApiError::TooManyRequests(wait)
        | ApiError::Busy {
            retry_after: wait, ..
        } = &self
        {
            if let Ok(v) = axum::http::HeaderValue::from_str(&wait.to_string()) {
                response.headers_mut().insert(axum::http::header::RETRY_AFTER, v);
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// An error with a cause, as a driver would return it.
    #[derive(Debug)]
    struct Outer(std::io::Error);
    impl fmt::Display for Outer {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("writing the batch failed")
        }
    }
    impl StdError for Outer {
        fn source(&self) -> Option<&(dyn StdError + 'static)> {
            Some(&self.0)
        }
    }

    /// A log sink the test can read.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn internal_errors_keep_origin_and_causes_for_the_log_only() {
        let cause = std::io::Error::other("disk full at /var/lib/secret-path");
        let line = line!() + 1;
        let error = ApiError::internal(Outer(cause));
        let ApiError::Internal(internal) = &error else {
            panic!("{error:?}")
        };
        assert_eq!(internal.location().file(), file!());
        assert_eq!(internal.location().line(), line);
        assert_eq!(
            internal.causes(),
            vec!["disk full at /var/lib/secret-path".to_string()]
        );
        assert_eq!(error.to_string(), "internal error: writing the batch failed");

        // The body says nothing of it.
        let body = error.body().to_string();
        for hidden in ["writing the batch", "disk full", "secret-path", file!()] {
            assert!(!body.contains(hidden), "{hidden} in {body}");
        }
        assert_eq!(
            error.body()["message"],
            "An internal error occurred. Quote the request_id when reporting it."
        );

        // The log line has all of it, within the request's span.
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish();
        let response = tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!("request", request_id = "req-42");
            span.in_scope(|| error.into_response())
        });
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let log = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        for shown in [
            "req-42",
            "writing the batch failed",
            "disk full at /var/lib/secret-path",
            &format!("{}:{line}:", file!()),
        ] {
            assert!(log.contains(shown), "{shown} missing from {log}");
        }
    }

    #[test]
    fn internal_errors_from_messages_and_the_question_mark() {
        fn fails() -> Result<(), ApiError> {
            Err(crate::db::DbError::Other("no such table: x".into()))?;
            Ok(())
        }
        let line = line!() - 3;
        let Err(ApiError::Internal(internal)) = fails() else {
            panic!("an internal error")
        };
        assert_eq!(internal.to_string(), "database error: no such table: x");
        assert_eq!(internal.location().file(), file!());
        assert_eq!(internal.location().line(), line, "the line of the `?`");

        let ApiError::Internal(internal) = ApiError::internal(format!("batch {} vanished", 7)) else {
            panic!()
        };
        assert_eq!(internal.to_string(), "batch 7 vanished");
        assert!(internal.causes().is_empty());
    }
}
