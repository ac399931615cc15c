//! The HTTP layer: routes, the request-id/logging/metrics middleware and
//! operational endpoints. Handlers never see SQL.

mod bins;
mod boarding;
pub mod crud;
mod developer;
mod devices;
mod devmail;
pub mod docs;
mod emulator;
pub mod extract;
mod hosted;
mod json_body;
pub mod metrics;
mod notes;
mod postbacks;
mod quickinvoices;
pub mod ratelimit;
mod recurrings;
mod terminals;
mod tokens;
mod transactions;
mod users;

use crate::clock::Clock;
use crate::crypto::Keyring;
use crate::db::Store;
use crate::engine::resource::Resource;
use crate::error::{ApiError, REQUEST_ID};
use crate::resources;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use std::sync::Arc;
use std::time::Instant;
use tracing::Instrument;

/// Largest request body accepted.
pub const MAX_BODY: usize = 1024 * 1024;

/// What every handler reaches: one allocation shared by all requests
/// (axum clones the state for each extractor of each request; a clone is
/// one reference count).
#[derive(Clone)]
pub struct AppState(Arc<App>);

impl AppState {
    pub fn new(app: App) -> AppState {
        AppState(Arc::new(app))
    }
}

impl std::ops::Deref for AppState {
    type Target = App;
    fn deref(&self) -> &App {
        &self.0
    }
}

/// The application's parts (see [`AppState`]).
pub struct App {
    pub store: Store,
    pub keyring: Arc<Keyring>,
    /// The only source of "now" (see `clock`).
    pub clock: Clock,
    pub public_url: Arc<str>,
    pub metrics: Arc<metrics::Metrics>,
    /// Where outbound requests (postbacks) may go.
    pub outbound: crate::outbound::OutboundPolicy,
    pub payments: crate::payments::Payments,
    pub deliveries: crate::postbacks::worker::Deliveries,
    pub schedules: crate::billing::scheduler::Schedules,
    /// Requests per API user and per client address (429 beyond).
    pub rate_limits: Arc<ratelimit::RateLimits>,
    pub mailer: crate::mail::smtp::Mailer,
    /// Told of every change, in its transaction (the postback outbox).
    pub sink: Arc<dyn crate::engine::events::EventSink>,
    /// Where file bytes live (quick-invoice attachments).
    pub files: Arc<dyn crate::files::FileStore>,
    /// Hands terminal requests to the node holding the device.
    pub router: crate::terminals::router::Router,
    /// Callers authenticated by API key, kept while they stay the same.
    pub callers: Arc<crate::auth::KnownCallers>,
    /// List exports running on this node (capped) and their stall limit.
    pub exports: Arc<crud::ExportLimits>,
}

/// The declared resources served by the generic routes, with their verbs.
/// Those with `own_routes` (users, transactions, batches) are served by
/// their own modules, which add actions (`me`, `generateuserapikey`,
/// `settle`, ...); the table still documents them.
pub static MOUNTED: &[(&Resource, crud::Verbs)] = &[
    (&resources::CONTACT, crud::ALL),
    (&resources::LOCATION, crud::ALL),
    (&resources::LOCATION_INFO, crud::READ_ONLY),
    (&resources::PRODUCT_TRANSACTION, crud::READ_ONLY),
    (&resources::NOTE, crud::ALL),
    (&resources::ACCOUNT_VAULT, crud::ALL),
    (&resources::RECURRING, crud::ALL),
    (&resources::TAG, crud::ALL),
    (&resources::HOSTED_PAYMENT_PAGE, crud::ALL),
    (&resources::QUICK_INVOICE, crud::ALL.own_routes()),
    (&resources::PRODUCT_FILE, crud::ALL),
    // The create answer carries the device secret (`terminals::create`).
    (&resources::TERMINAL, crud::ALL.own_routes()),
    // The create waits for the terminal (`terminals`).
    (
        &resources::DEVICE_TERM,
        crud::Verbs {
            create: true,
            update: false,
            delete: false,
            own_routes: true,
        },
    ),
    (
        &resources::SIGNATURE,
        crud::Verbs {
            create: true,
            update: false,
            delete: false,
            own_routes: false,
        },
    ),
    (&resources::USER, crud::ALL.own_routes()),
    (
        &resources::AUTH_ROLE_USER,
        crud::Verbs {
            create: true,
            update: false,
            delete: true,
            own_routes: false,
        },
    ),
    (
        &resources::TRANSACTION,
        crud::Verbs {
            create: true,
            update: true,
            delete: false,
            own_routes: true,
        },
    ),
    (&resources::TRANSACTION_BATCH, crud::READ_ONLY.own_routes()),
    (&resources::POSTBACK_CONFIG, crud::ALL),
    (&resources::POSTBACK_DELIVERY, crud::READ_ONLY),
];

pub fn app(state: AppState) -> Router {
    let mut api = Router::new()
        .merge(users::routes())
        .merge(tokens::routes())
        .merge(bins::routes())
        .merge(transactions::routes())
        .merge(postbacks::routes())
        .merge(notes::routes())
        .merge(recurrings::routes())
        .merge(boarding::routes())
        .merge(hosted::routes())
        .merge(quickinvoices::routes(state.clone()))
        .merge(terminals::routes())
        .merge(devices::routes())
        .merge(emulator::routes())
        .route(
            "/v2/accountvaultupdates",
            axum::routing::post(account_vault_updates),
        );
    // A test processor's controls exist only where it is the processor.
    if state.payments.simulator().is_some() {
        api = api.merge(developer::routes()).merge(devmail::routes());
    }
    for (res, verbs) in MOUNTED {
        if !verbs.own_routes {
            api = api.merge(crud::routes(res, *verbs));
        }
    }
    Router::new()
        .merge(api)
        .route(
            "/healthz",
            get(|| async { axum::Json(serde_json::json!({ "status": "ok" })) }),
        )
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .merge(docs::routes())
        .fallback(|| async { ApiError::NotFound("No such endpoint.".into()) })
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed })
        .layer(middleware::from_fn_with_state(state.clone(), limit_address))
        .layer(middleware::from_fn_with_state(state.clone(), observe))
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(state)
}

/// The application as the server runs it: [`app`], with every request
/// that may change something (any method but GET, HEAD and OPTIONS)
/// served on a task of its own from the moment the connection hands it
/// over. A client that hangs up right after sending drops the
/// connection, and with it whatever the connection was polling; a
/// payment must still be authenticated, read, sent to the processor and
/// recorded, so that a retry finds the result (payments also detach
/// their own steps, for producers without HTTP).
pub fn service(
    state: AppState,
) -> impl tower::Service<
    Request,
    Response = Response,
    Error = std::convert::Infallible,
    Future = impl std::future::Future<Output = Result<Response, std::convert::Infallible>> + Send,
> + Clone
       + Send {
    let router = app(state);
    tower::service_fn(move |request: Request| {
        let detach = !matches!(
            *request.method(),
            axum::http::Method::GET | axum::http::Method::HEAD | axum::http::Method::OPTIONS
        );
        // Router::call builds the response future without polling it.
        let response = tower::Service::call(&mut router.clone(), request);
        let work = if detach {
            Ok(tokio::spawn(response))
        } else {
            Err(response)
        };
        async move {
            match work {
                Ok(task) => Ok(match task.await {
                    Ok(Ok(response)) => response,
                    Ok(Err(never)) => match never {},
                    Err(e) => ApiError::internal(format!("request task failed: {e}")).into_response(),
                }),
                Err(inline) => inline.await,
            }
        }
    })
}

/// `POST /v2/accountvaultupdates`: one transaction, a report of changes.
async fn account_vault_updates(
    State(app): State<AppState>,
    caller: crate::auth::Caller,
    extract::RawBody(body): extract::RawBody,
) -> Result<Response, ApiError> {
    caller.perms.require("accountvaultupdates.create")?;
    let input = extract::envelope(&body, "accountvaultupdate")?;
    let request = resources::accountvaultupdates::parse(&input)?;
    let cx = app.cx(&caller);
    let report = app
        .store
        .write(move |conn| resources::accountvaultupdates::apply(&cx, conn, &request))
        .await?;
    Ok((
        axum::http::StatusCode::CREATED,
        axum::Json(serde_json::json!({ "accountvaultupdate": report })),
    )
        .into_response())
}

async fn readyz(State(app): State<AppState>) -> Response {
    match app.store.ping().await {
        Ok(()) => axum::Json(serde_json::json!({ "status": "ready" })).into_response(),
        Err(e) => {
            tracing::warn!(error = %e, "readiness check failed");
            ApiError::Unavailable("The database is not reachable.".into()).into_response()
        }
    }
}

async fn metrics_text(State(app): State<AppState>) -> Response {
    if let Some((commits, jobs)) = app.store.writer_stats() {
        app.metrics.writer(commits, jobs);
    }
    let text = app.metrics.render();
    (
        [(axum::http::header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        text,
    )
        .into_response()
}

fn request_id(req: &Request) -> String {
    req.headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .filter(|v| {
            !v.is_empty()
                && v.len() <= 64
                && v.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
        .map(str::to_string)
        .unwrap_or_else(crate::ids::new_id)
}

/// Gives every request an id (echoed in `x-request-id`, every log line of
/// the request and error bodies), logs it and records its metrics.
/// The per-address rate limit (health and metrics probes are exempt).
async fn limit_address(State(app): State<AppState>, req: Request, next: Next) -> Response {
    let probe = matches!(req.uri().path(), "/healthz" | "/readyz" | "/metrics");
    if let (false, Some(addr)) = (probe, req.extensions().get::<ratelimit::ClientAddr>()) {
        if let Err(wait) = app.rate_limits.address(addr.0) {
            return ApiError::TooManyRequests(wait).into_response();
        }
    }
    next.run(req).await
}

async fn observe(State(app): State<AppState>, req: Request, next: Next) -> Response {
    let started = Instant::now();
    let id = request_id(&req);
    let method = req.method().to_string();
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "unmatched".to_string());
    let path = logged_path(&route, req.uri().path());
    let span = tracing::info_span!("request", request_id = %id, method = %method, path = %path, user_id = tracing::field::Empty);
    let mut response = REQUEST_ID
        .scope(id.clone(), next.run(req).instrument(span.clone()))
        .await;
    if let Ok(v) = HeaderValue::from_str(&id) {
        response.headers_mut().insert("x-request-id", v);
    }
    let status = response.status().as_u16();
    let elapsed = started.elapsed();
    app.metrics
        .observe(&method, &route, status, elapsed.as_secs_f64());
    span.in_scope(|| {
        tracing::info!(
            status,
            latency_us = elapsed.as_micros() as u64,
            "request finished"
        );
    });
    response
}

/// Paths whose rest is a secret (a session token, a boarding
/// application's id, which is what lets someone change it, a pay link).
const SECRET_IN_PATH: &[&str] = &["/v2/token/", "/v1/application/", "/quickinvoice/pay/", "/hosted/"];

/// The path as logged, never with its query string (credentials may be
/// there). Under a secret prefix, only the route when one matched, else
/// the prefix and `{secret}`: a mistyped path (a wrong suffix, another
/// case, doubled slashes) holds the secret as much as the right one.
/// Elsewhere any card number in it is masked ([`masked_path`]).
fn logged_path<'a>(route: &str, path: &'a str) -> std::borrow::Cow<'a, str> {
    use std::borrow::Cow;
    if SECRET_IN_PATH.iter().any(|p| route.starts_with(p)) {
        return Cow::Owned(route.to_string());
    }
    // Compared as a router that forgave case and repeated slashes would.
    let mut plain = path.to_ascii_lowercase();
    while plain.contains("//") {
        plain = plain.replace("//", "/");
    }
    match SECRET_IN_PATH.iter().find(|p| plain.starts_with(*p)) {
        Some(prefix) => Cow::Owned(format!("{prefix}{{secret}}")),
        None => masked_path(path),
    }
}

/// A run of 12 to 19 digits that passes the Luhn check (a card number sent
/// where a BIN or an id belongs) keeps only its first six and last four
/// digits.
fn masked_path(path: &str) -> std::borrow::Cow<'_, str> {
    let bytes = path.as_bytes();
    let mut out: Option<String> = None;
    let mut i = 0;
    let mut copied = 0;
    while i < bytes.len() {
        if !bytes[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
        let run = &path[start..i];
        if (12..=19).contains(&run.len()) && crate::cards::luhn_ok(run) {
            let o = out.get_or_insert_with(String::new);
            o.push_str(&path[copied..start]);
            o.push_str(&run[..6]);
            o.push_str(&"*".repeat(run.len() - 10));
            o.push_str(&run[run.len() - 4..]);
            copied = i;
        }
    }
    match out {
        Some(mut o) => {
            o.push_str(&path[copied..]);
            std::borrow::Cow::Owned(o)
        }
        None => std::borrow::Cow::Borrowed(path),
    }
}

/// Turns axum's own rejections of a body (too large, unreadable) into ours.
pub fn body_rejection(status: StatusCode) -> ApiError {
    if status == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::PayloadTooLarge
    } else {
        ApiError::BadRequest("The request body could not be read.".into())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn card_numbers_are_masked_in_logged_paths() {
        let m = |p: &str| super::masked_path(p).into_owned();
        assert_eq!(m("/v2/bins/4111111111111111"), "/v2/bins/411111******1111");
        assert_eq!(m("/v2/x/371449635398431/y"), "/v2/x/371449*****8431/y");
        assert_eq!(m("/v2/bins/411111"), "/v2/bins/411111");
        assert_eq!(
            m("/v2/bins/4111111111111112"),
            "/v2/bins/4111111111111112",
            "fails Luhn"
        );
        assert_eq!(
            m("/v2/contacts/0190c0ffee4111111111111111ab"),
            "/v2/contacts/0190c0ffee411111******1111ab"
        );
        assert_eq!(
            m("/v2/contacts/01900000000000000000000000"),
            "/v2/contacts/01900000000000000000000000"
        );
        assert_eq!(m("/"), "/");
    }

    #[test]
    fn secrets_in_paths_are_never_logged_matched_or_not() {
        let l = |route: &str, p: &str| super::logged_path(route, p).into_owned();
        assert_eq!(l("/v2/token/{token}", "/v2/token/SECRET1"), "/v2/token/{token}");
        for (path, shown) in [
            ("/v2/token/SECRET1/x", "/v2/token/{secret}"),
            ("/V2/Token/SECRET1", "/v2/token/{secret}"),
            ("//v2//token/SECRET1", "/v2/token/{secret}"),
            ("/v1/application/SECRET1/extra/more", "/v1/application/{secret}"),
            ("/quickinvoice/pay/SECRET1/x", "/quickinvoice/pay/{secret}"),
            ("/hosted/SECRET1/nothing-here", "/hosted/{secret}"),
        ] {
            assert_eq!(l("unmatched", path), shown);
        }
        assert_eq!(l("unmatched", "/v2/nowhere/abc"), "/v2/nowhere/abc");
        assert_eq!(l("/v2/token", "/v2/token"), "/v2/token");
    }
}
