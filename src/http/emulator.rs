//! The Authorize.Net emulator over HTTP (ADR 0016): the XML/JSON API at
//! `POST /xml/v1/request.api` (the official libraries' path) and
//! `POST /gateway/request.api`, AIM at `POST /gateway/transact.dll`.
//!
//! Their login (`name`, `x_login`) is our user id, their transaction key
//! our user API key, and `?developer=` on the URL our developer id. Every
//! answer is theirs in shape and HTTP 200, refusals included, as
//! Authorize.Net answers; nothing here answers a 5xx. The translation is
//! `emulator`; payments go through `payments` with trx_source_id 11.

use super::extract::query_pairs;
use super::AppState;
use crate::auth::{authenticate, Caller, Credentials};
use crate::billing::{self, transitions};
use crate::emulator::codes::{self, api, ResponseCode};
use crate::emulator::methods::{self, Method};
use crate::emulator::numbers::{self, Kind as Number};
use crate::emulator::reporting::{self, Which};
use crate::emulator::sent::{self, Sent};
use crate::emulator::shown::{self, Depth};
use crate::emulator::transaction::{self, Kind, Outcome, Refusal};
use crate::emulator::tree::{self, Format, Out};
use crate::emulator::{aim, arb, envelope, subscription_keys};
use crate::engine::{self, query, validate, Cx};
use crate::error::{ApiError, FieldErrors};
use crate::payments::{actions, DuplicateGuard, FollowUp, NewPayment, Origin, TransactionId, TrxSource};
use crate::processor::ReasonCode;
use crate::resources::{ACCOUNT_VAULT, CONTACT, RECURRING, TRANSACTION};
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{RawQuery, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use serde_json::{Map, Value as Json};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/xml/v1/request.api", post(request_api))
        .route("/gateway/request.api", post(request_api))
        .route("/gateway/transact.dll", post(transact))
}

/// A top-level message with owned text.
type Message = (&'static str, String);

fn message(m: (&'static str, &'static str)) -> Message {
    (m.0, m.1.to_string())
}

fn document(format: Format, root: &str, body: &Out) -> Response {
    let content_type = match format {
        Format::Xml => "application/xml; charset=utf-8",
        Format::Json => "application/json; charset=utf-8",
    };
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-store"),
        ],
        tree::render(format, root, body),
    )
        .into_response()
}

/// `ErrorResponse`: what is answered before a method can run.
fn error_document(format: Format, ref_id: Option<&str>, m: Message) -> Response {
    document(
        format,
        "ErrorResponse",
        &envelope(ref_id, false, (m.0, &m.1), Vec::new()),
    )
}

/// Their message for one of our errors met before or around an operation.
fn api_message(e: &ApiError) -> Message {
    match e {
        ApiError::Unauthorized(_) => message(api::BAD_AUTH),
        ApiError::Forbidden(_) => message(api::DENIED),
        ApiError::NotFound(_) => message(api::NO_RECORD),
        ApiError::Validation(errors) | ApiError::Conflict(errors) => {
            (api::INVALID_FIELD, first_error(errors))
        }
        ApiError::TooManyRequests(wait) => (
            api::INTERNAL.0,
            format!("Too many requests: retry in {wait} seconds."),
        ),
        other => {
            if matches!(other, ApiError::Internal(_)) {
                tracing::error!(error = ?other, "emulator request failed");
            }
            message(api::INTERNAL)
        }
    }
}

fn first_error(errors: &FieldErrors) -> String {
    errors
        .0
        .iter()
        .flat_map(|(field, ms)| ms.iter().map(move |m| format!("{field}: {m}")))
        .next()
        .unwrap_or_else(|| "A field is invalid.".into())
}

/// The caller named by their credentials, within the user's rate limit.
async fn caller(
    app: &AppState,
    developer: Option<String>,
    login: Option<String>,
    key: Option<String>,
) -> Result<Caller, ApiError> {
    let Some(key) = key else {
        return Err(ApiError::Unauthorized("no transaction key".into()));
    };
    let caller = match login {
        // A short login (`generateemulatorkey`), for clients that hold
        // their schema's lengths.
        Some(login) if crate::emulator::credentials::is_short_login(&login) => {
            let developer = developer.unwrap_or_default();
            app.store
                .read(move |conn| crate::emulator::credentials::authenticate(conn, &developer, &login, &key))
                .await?
        }
        login => {
            let creds = Credentials {
                developer_id: developer,
                user_id: login,
                api_key: Some(key),
                access_token: None,
            };
            let clock = app.clock.clone();
            app.store
                .read(move |conn| authenticate(conn, creds, &clock))
                .await?
        }
    };
    app.rate_limits
        .user(&caller.user_id)
        .map_err(ApiError::TooManyRequests)?;
    Ok(caller)
}

fn developer_of(query: Option<&str>) -> Option<String> {
    query_pairs(query)
        .into_iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("developer"))
        .map(|(_, v)| v)
        .filter(|v| !v.is_empty())
}

// ---------------------------------------------------------------------
// The XML and JSON API

async fn request_api(
    State(app): State<AppState>,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let json_declared = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("json"));
    let declared = if json_declared { Format::Json } else { Format::Xml };
    let Ok(body) = body else {
        return error_document(
            declared,
            None,
            (
                api::UNREADABLE,
                "The request could not be read (it may be too large).".into(),
            ),
        );
    };
    let parsed = match tree::parse(&body, declared) {
        Ok(p) => p,
        Err(e) => return error_document(e.format, None, (api::UNREADABLE, e.message)),
    };
    let format = parsed.format;
    let ref_id = tree::text(&parsed.body, "refId").map(|r| r.chars().take(20).collect::<String>());
    let ref_id = ref_id.as_deref();
    let method = parsed.method.as_str();
    let kind = methods::of(method);
    if kind == Method::Unknown {
        return error_document(format, ref_id, message(api::UNKNOWN_METHOD));
    }
    let root = methods::answer_root(method);
    // Their gateway's ping: no credentials.
    if method == "isAliveRequest" {
        return document(format, &root, &envelope(ref_id, true, api::OK, Vec::new()));
    }
    let login = tree::text(&parsed.body, "merchantAuthentication.name");
    let key = tree::text(&parsed.body, "merchantAuthentication.transactionKey");
    let caller = match caller(&app, developer_of(q.as_deref()), login, key).await {
        Ok(c) => c,
        Err(e) => return error_document(format, ref_id, api_message(&e)),
    };
    let body = &parsed.body;
    let result = match (kind, method) {
        (Method::Cim, _) => Ok((message(api::NO_CIM), false, methods::required_empty(method))),
        (Method::NotEnabled, _) => Ok((message(api::DENIED), false, methods::required_empty(method))),
        (_, "authenticateTestRequest") => Ok((message(api::OK), true, Vec::new())),
        (_, "createTransactionRequest") => Ok(create_transaction(&app, &caller, body).await),
        (_, "getTransactionDetailsRequest") => transaction_details(&app, &caller, body).await,
        (_, "getSettledBatchListRequest") => settled_batch_list(&app, &caller, body).await,
        (_, "getBatchStatisticsRequest") => batch_statistics(&app, &caller, body).await,
        (_, "getTransactionListRequest") => transaction_list(&app, &caller, body).await,
        (_, "getUnsettledTransactionListRequest") => unsettled_transaction_list(&app, &caller, body).await,
        (_, "ARBCreateSubscriptionRequest") => arb_create(&app, &caller, body).await,
        (_, "ARBGetSubscriptionRequest") => arb_get(&app, &caller, body, false).await,
        (_, "ARBGetSubscriptionStatusRequest") => arb_get(&app, &caller, body, true).await,
        (_, "ARBUpdateSubscriptionRequest") => arb_update(&app, &caller, body).await,
        _ => arb_cancel(&app, &caller, body).await,
    };
    match result {
        // What their schema check refuses is answered before any method
        // runs, as ErrorResponse.
        Ok((m, _, _)) if m.0 == api::UNREADABLE => error_document(format, ref_id, m),
        Ok((m, ok, rest)) => document(format, &root, &envelope(ref_id, ok, (m.0, &m.1), rest)),
        // A method's own refusal (a permission, a field) is its answer.
        Err(e) => {
            let m = api_message(&e);
            document(format, &root, &envelope(ref_id, false, (m.0, &m.1), Vec::new()))
        }
    }
}

/// What a method answers: its message, whether it succeeded, and its
/// own elements.
type Answer = (Message, bool, Vec<(&'static str, Out)>);

async fn create_transaction(app: &AppState, caller: &Caller, body: &Map<String, Json>) -> Answer {
    let Some(request) = tree::object(body, "transactionRequest") else {
        let outcome = Outcome::refused(
            None,
            &Refusal::with(codes::TRY_AGAIN, "transactionRequest is required."),
        );
        return (
            message(api::FAILED),
            false,
            vec![("transactionResponse", outcome.to_out())],
        );
    };
    // A payment by customer profile: the emulator keeps no customer
    // profiles (the ids an ARB subscription answers name none), so it is
    // their answer to an account without CIM, and nothing is charged.
    if transaction::pays_by_profile(request) {
        return (message(api::NO_CIM), false, Vec::new());
    }
    let outcome = Outcome {
        user_fields: transaction::user_fields(request),
        ..run_transaction(app, caller, request).await
    };
    let m = if outcome.ok() {
        message(api::OK)
    } else {
        message(api::FAILED)
    };
    let mut rest = vec![("transactionResponse", outcome.to_out())];
    // A profile asked of the payment: the payment is made as asked, and
    // `profileResponse` says beside it that no profile was.
    if transaction::asks_for_profile(request) {
        rest.push(("profileResponse", envelope(None, false, api::NO_CIM, Vec::new())));
    }
    (m, outcome.ok(), rest)
}

/// One transaction request through the payments core, as their outcome.
async fn run_transaction(app: &AppState, caller: &Caller, request: &Map<String, Json>) -> Outcome {
    let guess = tree::text(request, "transactionType").and_then(|t| Kind::parse(&t));
    let plan = match transaction::plan(request) {
        Ok(p) => p,
        Err(r) => return Outcome::refused(guess, &r),
    };
    let kind = plan.kind;
    let permission = if kind.follows_up() {
        "transactions.update"
    } else {
        "transactions.create"
    };
    if caller.perms.require(permission).is_err() {
        return Outcome::refused(Some(kind), &Refusal::new(codes::NO_PERMISSION));
    }
    // Test mode: checked as any request, answered approved with
    // transaction id 0, and nothing is charged or stored.
    if transaction::setting_on(request, "testRequest") {
        let number = plan.body.get("account_number").and_then(Json::as_str);
        if number.is_some_and(|n| !crate::cards::luhn_ok(n)) {
            return Outcome::refused(Some(kind), &Refusal::new(codes::BAD_CARD));
        }
        return match actions::parse(&plan.body, kind.follows_up()) {
            Ok(_) => Outcome::test_mode(kind, &plan.body),
            Err(e) => Outcome::refused(Some(kind), &refusal_of(kind, &e, None)),
        };
    }
    let cx = app.cx(caller);
    // The transaction the request refers to: a number we answered (or,
    // for clients that know it, our own id), in the caller's scope.
    let mut referenced: Option<Referenced> = None;
    let mut body = plan.body;
    // Their capture sends a total; a surcharged authorization completed
    // for another total needs its parts, worked out at the rate.
    let capture_total = (kind == Kind::PriorAuthCapture)
        .then(|| body.get("transaction_amount").and_then(Json::as_str))
        .flatten()
        .and_then(|t| crate::money::parse_text(t, i64::MAX / 100).ok());
    let mut parts: Option<(i64, i64, i64)> = None;
    if let Some(reference) = plan.reference.clone() {
        let cx2 = cx.clone();
        let found = app
            .store
            .write(move |conn| {
                let id = if crate::ids::looks_like_id(&reference) {
                    Some(reference)
                } else {
                    numbers::record_of(conn, Number::Transaction, &reference)?
                };
                let Some(id) = id else { return Ok(None) };
                let Some(tx) = query::find(conn, &TRANSACTION, &cx2.scope, &id)? else {
                    return Ok(None);
                };
                let number = numbers::number_of(conn, Number::Transaction, tx.id())?;
                let surcharged = tx.int("surcharge_amount").is_some_and(|s| s > 0);
                let parts = match capture_total {
                    Some(total) if surcharged && tx.int("transaction_amount") != Some(total) => {
                        let tax = tx.int("tax").unwrap_or(0);
                        let pt = tx.text("product_transaction_id").unwrap_or_default();
                        let bp = crate::payments::surcharge::product_rate(conn, pt)?;
                        crate::payments::surcharge::split(total, tax, bp).map(|(s, c)| (s, c, tax))
                    }
                    _ => None,
                };
                let found = Referenced {
                    id: tx.id().to_string(),
                    number,
                    status_id: tx.int("status_id").unwrap_or(0),
                    last_four: tx.text("last_four").unwrap_or_default().to_string(),
                    amount: tx.int("transaction_amount").unwrap_or(0),
                };
                Ok(Some((found, parts)))
            })
            .await;
        match found {
            Ok(Some((r, p))) => {
                referenced = Some(r);
                parts = p;
            }
            Ok(None) => return Outcome::refused(Some(kind), &Refusal::new(codes::NOT_FOUND)),
            Err(e) => return Outcome::refused(Some(kind), &refusal_of(kind, &e, None)),
        }
    }
    if let Some((subtotal, surcharge, tax)) = parts {
        for (name, cents) in [
            ("subtotal_amount", subtotal),
            ("surcharge_amount", surcharge),
            ("tax", tax),
        ] {
            body.insert(name.into(), Json::String(crate::money::format(cents)));
        }
    }
    if let (Kind::Refund, Some(original)) = (kind, &referenced) {
        if plan.refund_last_four.as_deref() != Some(original.last_four.as_str()) {
            return Outcome::refused(
                Some(kind),
                &Refusal::with(
                    codes::NO_CREDIT,
                    format!(
                        "{} The card is not the referenced transaction's.",
                        codes::NO_CREDIT.text
                    ),
                ),
            );
        }
        body.insert(
            "previous_transaction_id".into(),
            Json::String(original.id.clone()),
        );
    }
    let status = referenced.as_ref().map(|r| r.status_id);
    let duplicate_guard = duplicate_guard(&cx, kind, request, &body, referenced.as_ref());
    let guard_key = duplicate_guard.as_ref().map(|g| g.key.clone());
    let reply = match (&referenced, kind.follows_up()) {
        (Some(original), true) => match actions::parse(&body, true) {
            Ok(input) => {
                let request = FollowUp {
                    transaction: TransactionId::new(original.id.clone()),
                    input,
                    idempotency: None,
                };
                app.payments.update(cx.clone(), request).await
            }
            Err(e) => Err(e),
        },
        _ => match actions::parse(&body, false) {
            Ok(input) => {
                let request = NewPayment {
                    input,
                    origin: Origin {
                        duplicate_guard,
                        ..Origin::from(TrxSource::Emulator)
                    },
                    idempotency: None,
                };
                app.payments.create(cx.clone(), request).await
            }
            Err(e) => Err(e),
        },
    };
    let reply = match reply {
        Ok(r) => r,
        Err(e) => {
            let refusal = refusal_of(kind, &e, status);
            let mut outcome = Outcome::refused(Some(kind), &refusal);
            // A client that sends duplicateWindow is told the original
            // transaction's id, AVS and card code results and, when it was
            // approved, its authorization code (their reason 11 details),
            // so it can recover an order whose first answer it lost.
            if let (true, Some(key)) = (
                refusal.reason == codes::DUPLICATE
                    && transaction::setting(request, "duplicateWindow").is_some(),
                guard_key,
            ) {
                if let Some(original) = duplicated_original(app, &cx, kind, key).await {
                    outcome.trans_id = original.trans_id;
                    outcome.auth_code = original.auth_code;
                    outcome.avs = original.avs;
                    outcome.cvv = original.cvv;
                }
            }
            // Already voided or captured: their success names the
            // transaction it was about.
            if let (ResponseCode::Approved, Some(original)) = (refusal.reason.response, &referenced) {
                outcome.trans_id = original.number.to_string();
                outcome.ref_trans_id = original.number.to_string();
            }
            return outcome;
        }
    };
    let tx = reply.transaction().clone();
    let id = tx["id"].as_str().unwrap_or_default().to_string();
    let partial = tx["reason_code_id"].as_i64() == Some(i64::from(ReasonCode::PARTIAL_APPROVAL.code()));
    // A new payment keeps what our row cannot tell: their type, and
    // whether the invoice number is the client's or the core's.
    let sent = (!kind.follows_up()).then(|| Sent {
        kind,
        invoice_sent: body.contains_key("order_num"),
        first_name: transaction::bill_to_name(request, "firstName"),
        last_name: transaction::bill_to_name(request, "lastName"),
    });
    // Their reason 19 asks the client to try again: the attempt must not
    // hold the duplicate key the retry needs.
    let try_again = codes::of_reason(tx["reason_code_id"].as_i64().unwrap_or(0)) == codes::TRY_AGAIN;
    let release = guard_key.filter(|_| try_again);
    let numbered = app
        .store
        .write(move |conn| {
            let number = numbers::number_of(conn, Number::Transaction, &id)?;
            if let Some(key) = release {
                crate::payments::create::release_duplicate_guard(conn, &key, &id)?;
            }
            if let Some(sent) = &sent {
                sent::record(conn, &id, sent)?;
            }
            // A partial approval opens a split tender for the balance.
            let split_tender = if partial {
                Some(numbers::number_of(conn, Number::SplitTender, &id)?)
            } else {
                None
            };
            Ok((number, split_tender))
        })
        .await;
    match numbered {
        Ok((number, split_tender)) => {
            let mut outcome = Outcome::of(kind, &tx, number, referenced.as_ref().map(|r| r.number));
            // A void answers the amount it voided (AIM's field 10), not the
            // zero our voided row now holds.
            if let (Kind::Void, Some(original)) = (kind, &referenced) {
                outcome.amount = crate::money::format(original.amount);
            }
            if let Some(split_id) = split_tender {
                let cents = |amount: Option<&str>| {
                    crate::money::parse_text(amount.unwrap_or_default(), i64::MAX / 100).unwrap_or(0)
                };
                // Asked for in the request; approved as stored.
                let requested = cents(body.get("transaction_amount").and_then(Json::as_str));
                let approved = cents(tx["transaction_amount"].as_str());
                outcome.split_tender = Some(transaction::SplitTender::new(split_id, requested, approved));
            }
            outcome
        }
        Err(e) => Outcome::refused(Some(kind), &refusal_of(kind, &e, status)),
    }
}

/// The transaction a follow-up, capture or refund refers to.
struct Referenced {
    id: String,
    /// Its number, as we answered it.
    number: i64,
    status_id: i64,
    last_four: String,
    /// Its amount in cents before this request (a void zeroes it).
    amount: i64,
}

/// The guard that refuses a new payment repeating one this emulator took
/// at the caller's location within `duplicateWindow` seconds, as
/// Authorize.Net refuses a double click or a retried post: the same
/// transaction type, card (first six and last four digits), amount and
/// invoice number as sent (none sent is a value of its own; the payments
/// core numbers such orders itself). A refund's card is the referenced
/// transaction's, so its key names that transaction and the last four
/// digits: a second refund of the same amount of one sale within the
/// window is refused, as Authorize.Net refuses it. The key is a digest,
/// so the guards table holds no card digits.
fn duplicate_guard(
    cx: &Cx,
    kind: Kind,
    request: &Map<String, Json>,
    body: &Map<String, Json>,
    referenced: Option<&Referenced>,
) -> Option<DuplicateGuard> {
    use sha2::{Digest, Sha256};
    let (card, last_four) = match kind {
        Kind::AuthCapture | Kind::AuthOnly | Kind::CaptureOnly => {
            let number = body.get("account_number").and_then(Json::as_str)?;
            (
                number.get(..6)?.to_string(),
                number.get(number.len().checked_sub(4)?..)?.to_string(),
            )
        }
        Kind::Refund => {
            let original = referenced?;
            (format!("refund of {}", original.id), original.last_four.clone())
        }
        Kind::PriorAuthCapture | Kind::Void => return None,
    };
    let amount = body.get("transaction_amount").and_then(Json::as_str)?;
    let cents = crate::money::parse_text(amount, i64::MAX / 100).ok()?;
    let invoice = tree::text(request, "order.invoiceNumber");
    let parts = [
        cx.scope.location_id.as_str(),
        kind.api_name(),
        &card,
        &last_four,
        &cents.to_string(),
        // "-" for none sent: no sent invoice is empty (blank is absent).
        invoice.as_deref().map_or("-", |i| i),
    ];
    let mut digest = Sha256::new();
    for part in parts {
        // Length-prefixed, so no two lists of parts read the same.
        digest.update((part.len() as u64).to_be_bytes());
        digest.update(part.as_bytes());
    }
    Some(DuplicateGuard {
        key: format!("anet:{}", hex::encode(digest.finalize())),
        window_secs: transaction::duplicate_window(request),
    })
}

/// The transaction holding a duplicate's guard key, in the caller's
/// scope, as their outcome (its number, authorization code, AVS and card
/// code results); `None` when it cannot be read.
async fn duplicated_original(app: &AppState, cx: &Cx, kind: Kind, key: String) -> Option<Outcome> {
    let cx2 = cx.clone();
    let found = app
        .store
        .write(move |conn| {
            let Some(id) = crate::payments::create::duplicate_guard_holder(conn, &key)? else {
                return Ok(None);
            };
            let Some(tx) = query::find(conn, &TRANSACTION, &cx2.scope, &id)? else {
                return Ok(None);
            };
            let number = numbers::number_of(conn, Number::Transaction, tx.id())?;
            Ok(Some((Json::Object(engine::render(&cx2, &tx)), number)))
        })
        .await;
    match found {
        Ok(Some((tx, number))) => Some(Outcome::of(kind, &tx, number, None)),
        Ok(None) => None,
        Err(e) => {
            tracing::warn!(error = %e, "emulator: the duplicated transaction could not be read");
            None
        }
    }
}

/// One of our refusals as their reason: by the field it names, else by
/// what the referenced transaction's state says.
fn refusal_of(kind: Kind, e: &ApiError, referenced_status: Option<i64>) -> Refusal {
    let errors = match e {
        ApiError::NotFound(_) => return Refusal::new(codes::NOT_FOUND),
        ApiError::Validation(errors) | ApiError::Conflict(errors) => errors,
        other => {
            if matches!(other, ApiError::Internal(_)) {
                tracing::error!(error = ?other, "emulated transaction failed");
            }
            return Refusal::new(codes::TRY_AGAIN);
        }
    };
    let Some((field, messages)) = errors.0.iter().next() else {
        return Refusal::new(codes::TRY_AGAIN);
    };
    let text = messages.first().cloned().unwrap_or_default();
    match (field.as_str(), kind) {
        (DuplicateGuard::REFUSED_FIELD, _) => Refusal::new(codes::DUPLICATE),
        ("account_number", _) => Refusal::new(codes::BAD_CARD),
        ("exp_date", _)
            if ["expired", "in the past"]
                .iter()
                .any(|w| text.to_ascii_lowercase().contains(w)) =>
        {
            Refusal::new(codes::EXPIRED)
        }
        ("exp_date", _) => Refusal::new(codes::BAD_EXPIRY),
        ("cvv", _) => Refusal::new(codes::BAD_CVV),
        ("transaction_amount", Kind::Refund) => Refusal::new(codes::OVER_CREDITED),
        ("transaction_amount", Kind::PriorAuthCapture) => Refusal::new(codes::OVER_AUTHORIZED),
        ("transaction_amount", _) => Refusal::new(codes::BAD_AMOUNT),
        (_, Kind::Void) if referenced_status == Some(201) => Refusal::new(codes::ALREADY_VOIDED),
        (_, Kind::PriorAuthCapture) if referenced_status == Some(101) => {
            Refusal::new(codes::ALREADY_CAPTURED)
        }
        (_, Kind::Refund) => Refusal::with(codes::NO_CREDIT, format!("{} {text}", codes::NO_CREDIT.text)),
        // A void or capture the referenced transaction's state does not
        // allow (a settled sale, a voided or declined authorization):
        // Authorize.Net finds no transaction it could void or capture,
        // their 16, which no retry changes (19 would invite one).
        (_, Kind::Void | Kind::PriorAuthCapture) => Refusal::new(codes::NOT_FOUND),
        // Our message, never our field names: shoppers may read it.
        _ if text.is_empty() => Refusal::new(codes::TRY_AGAIN),
        _ => Refusal::with(codes::TRY_AGAIN, text),
    }
}

// ---------------------------------------------------------------------
// Transaction Reporting

/// Their E00011 for the Transaction Details API when the caller may not
/// use it: our permissions to read what the method shows.
fn reporting_denied(caller: &Caller, permissions: &[&str]) -> Option<Answer> {
    permissions
        .iter()
        .any(|p| caller.perms.require(p).is_err())
        .then(|| (message(api::NO_REPORTING), false, Vec::new()))
}

fn refused(r: reporting::Refusal) -> Answer {
    ((r.0, r.1), false, Vec::new())
}

async fn transaction_details(
    app: &AppState,
    caller: &Caller,
    body: &Map<String, Json>,
) -> Result<Answer, ApiError> {
    if let Some(denied) = reporting_denied(caller, &["transactions.read"]) {
        return Ok(denied);
    }
    let number = match reporting::number(body, "transId") {
        Ok(Some(n)) => n,
        Ok(None) => {
            return Ok(refused(reporting::missing(
                "getTransactionDetailsRequest",
                "transId",
            )))
        }
        Err(r) => return Ok(refused(r)),
    };
    let cx = app.cx(caller);
    let found = app
        .store
        .write(move |conn| {
            let Some(tx) = shown::find(conn, &cx.scope, &number)? else {
                return Ok(None);
            };
            let facts = shown::facts(conn, &cx.scope, &tx, Depth::Details)?;
            Ok(Some((Json::Object(engine::render(&cx, &tx)), facts)))
        })
        .await?;
    Ok(match found {
        Some((tx, facts)) => (
            message(api::OK),
            true,
            vec![("transaction", transaction::details(&tx, &facts))],
        ),
        None => (message(api::NO_RECORD), false, Vec::new()),
    })
}

/// Ok, with I00004 when a list is empty, as theirs answers.
fn listed(empty: bool) -> Message {
    if empty {
        message(api::NO_RECORDS)
    } else {
        message(api::OK)
    }
}

async fn settled_batch_list(
    app: &AppState,
    caller: &Caller,
    body: &Map<String, Json>,
) -> Result<Answer, ApiError> {
    if let Some(denied) = reporting_denied(caller, &["transactionbatches.read", "transactions.read"]) {
        return Ok(denied);
    }
    let cx = app.cx(caller);
    let (statistics, window) = match (
        reporting::boolean(body, "includeStatistics"),
        reporting::settlement_window(body, cx.now),
    ) {
        (Ok(statistics), Ok(window)) => (statistics.unwrap_or(false), window),
        (Err(r), _) | (_, Err(r)) => return Ok(refused(r)),
    };
    let batches = app
        .store
        .write(move |conn| reporting::settled_batches(conn, &cx, window, statistics))
        .await?;
    if batches.is_empty() {
        return Ok((listed(true), true, Vec::new()));
    }
    Ok((
        listed(false),
        true,
        vec![("batchList", Out::List("batch", batches))],
    ))
}

async fn batch_statistics(
    app: &AppState,
    caller: &Caller,
    body: &Map<String, Json>,
) -> Result<Answer, ApiError> {
    if let Some(denied) = reporting_denied(caller, &["transactionbatches.read", "transactions.read"]) {
        return Ok(denied);
    }
    let number = match reporting::number(body, "batchId") {
        Ok(Some(n)) => n,
        Ok(None) => {
            return Ok(refused(reporting::missing(
                "getBatchStatisticsRequest",
                "batchId",
            )))
        }
        Err(r) => return Ok(refused(r)),
    };
    let cx = app.cx(caller);
    let batch = app
        .store
        .write(move |conn| match reporting::settled_batch(conn, &cx, &number)? {
            Some(batch) => Ok(Some(reporting::batch_out(conn, &cx, &batch, true)?)),
            None => Ok(None),
        })
        .await?;
    Ok(match batch {
        Some(batch) => (message(api::OK), true, vec![("batch", batch)]),
        None => (message(api::NO_RECORD), false, Vec::new()),
    })
}

/// A page of a transaction list, as their answer: the transactions and
/// how many the list holds.
fn transactions_page(page: Vec<Out>, total: usize) -> Answer {
    let mut rest = Vec::new();
    let empty = page.is_empty();
    if !empty {
        rest.push(("transactions", Out::List("transaction", page)));
    }
    rest.push(("totalNumInResultSet", Out::text(total.to_string())));
    (listed(empty), true, rest)
}

async fn transaction_list(
    app: &AppState,
    caller: &Caller,
    body: &Map<String, Json>,
) -> Result<Answer, ApiError> {
    if let Some(denied) = reporting_denied(caller, &["transactionbatches.read", "transactions.read"]) {
        return Ok(denied);
    }
    let (number, listing) = match (reporting::number(body, "batchId"), reporting::listing(body)) {
        (Ok(Some(number)), Ok(listing)) => (number, listing),
        // Their schema lets batchId out; their method lists one batch.
        (Ok(None), Ok(_)) => {
            return Ok((
                (api::MISSING_FIELD, "batchId is required.".into()),
                false,
                Vec::new(),
            ))
        }
        (Err(r), _) | (_, Err(r)) => return Ok(refused(r)),
    };
    let cx = app.cx(caller);
    let (page, total) = app
        .store
        .write(move |conn| match reporting::settled_batch(conn, &cx, &number)? {
            Some(batch) => reporting::transactions(conn, &cx, &Which::Batch(batch.id().to_string()), listing),
            // A number that names none of the caller's settled batches:
            // no records, as a batch without transactions.
            None => Ok((Vec::new(), 0)),
        })
        .await?;
    Ok(transactions_page(page, total))
}

async fn unsettled_transaction_list(
    app: &AppState,
    caller: &Caller,
    body: &Map<String, Json>,
) -> Result<Answer, ApiError> {
    if let Some(denied) = reporting_denied(caller, &["transactions.read"]) {
        return Ok(denied);
    }
    let (pending_approval, listing) = match (reporting::pending_approval_only(body), reporting::listing(body))
    {
        (Ok(p), Ok(l)) => (p, l),
        (Err(r), _) | (_, Err(r)) => return Ok(refused(r)),
    };
    if pending_approval {
        return Ok(transactions_page(Vec::new(), 0));
    }
    let cx = app.cx(caller);
    let (page, total) = app
        .store
        .write(move |conn| reporting::transactions(conn, &cx, &Which::Unsettled, listing))
        .await?;
    Ok(transactions_page(page, total))
}

// ---------------------------------------------------------------------
// Automated Recurring Billing

fn arb_refused(r: arb::Refusal) -> Answer {
    ((r.0, r.1), false, Vec::new())
}

/// The field of the error that refuses a duplicate subscription (and
/// rolls back its job).
const DUPLICATE_SUBSCRIPTION_FIELD: &str = "duplicate_subscription";

/// A validation failure inside an ARB job, as their field message.
fn arb_error(e: ApiError) -> Result<Answer, ApiError> {
    match e {
        ApiError::Validation(errors) | ApiError::Conflict(errors)
            if errors.has(DUPLICATE_SUBSCRIPTION_FIELD) =>
        {
            Ok((message(api::DUPLICATE_SUBSCRIPTION), false, Vec::new()))
        }
        // A start before today is their E00017, not a field error.
        ApiError::Validation(errors)
            if errors
                .0
                .get("start_date")
                .is_some_and(|ms| ms.iter().any(|m| m.contains("in the past"))) =>
        {
            Ok((message(api::START_IN_PAST), false, Vec::new()))
        }
        ApiError::Validation(errors) | ApiError::Conflict(errors) => {
            Ok(((api::INVALID_FIELD, first_error(&errors)), false, Vec::new()))
        }
        other => Err(other),
    }
}

fn create_input(
    res: &'static crate::engine::resource::Resource,
    body: &Map<String, Json>,
) -> Result<validate::CreateInput, ApiError> {
    validate::for_create(res, body).map_err(ApiError::Validation)
}

async fn arb_create(app: &AppState, caller: &Caller, body: &Map<String, Json>) -> Result<Answer, ApiError> {
    for p in ["recurrings.create", "accountvaults.create", "contacts.create"] {
        caller.perms.require(p)?;
    }
    let cx = app.cx(caller);
    let Some(sub) = tree::object(body, "subscription") else {
        return Ok(arb_refused((
            api::MISSING_FIELD,
            "subscription is required.".into(),
        )));
    };
    let new = match arb::create(sub, &cx.scope.location_id) {
        Ok(n) => n,
        Err(r) => return Ok(arb_refused(r)),
    };
    let created = app
        .store
        .write(move |conn| {
            let (contact, _) = engine::create(&cx, conn, &CONTACT, create_input(&CONTACT, &new.contact)?)?;
            let mut vault_body = new.vault;
            vault_body.insert("contact_id".into(), Json::String(contact.id().to_string()));
            let (vault, _) = engine::create(
                &cx,
                conn,
                &ACCOUNT_VAULT,
                create_input(&ACCOUNT_VAULT, &vault_body)?,
            )?;
            let mut recurring_body = new.recurring;
            recurring_body.insert("account_vault_id".into(), Json::String(vault.id().to_string()));
            let (recurring, _) =
                engine::create(&cx, conn, &RECURRING, create_input(&RECURRING, &recurring_body)?)?;
            // Their duplicate check, in this job: a refusal rolls back the
            // records made above.
            if subscription_keys::claim(conn, &new.duplicate_key, recurring.id())?.is_some() {
                return Err(ApiError::field(
                    DUPLICATE_SUBSCRIPTION_FIELD,
                    api::DUPLICATE_SUBSCRIPTION.1,
                ));
            }
            let profile = arb::ProfileNumbers {
                contact: numbers::number_of(conn, Number::Contact, contact.id())?,
                vault: numbers::number_of(conn, Number::Vault, vault.id())?,
            };
            Ok((
                numbers::number_of(conn, Number::Subscription, recurring.id())?,
                profile,
            ))
        })
        .await;
    let (number, profile) = match created {
        Ok(n) => n,
        Err(e) => return arb_error(e),
    };
    app.schedules.wake();
    Ok((
        message(api::OK),
        true,
        vec![
            ("subscriptionId", Out::text(number.to_string())),
            ("profile", profile.to_out()),
        ],
    ))
}

/// The caller's recurring a subscription id names.
fn find_subscription(
    conn: &mut dyn crate::db::Conn,
    cx: &Cx,
    number: &str,
) -> Result<Option<crate::engine::record::Record>, ApiError> {
    let Some(id) = numbers::record_of(conn, Number::Subscription, number)? else {
        return Ok(None);
    };
    Ok(query::find(conn, &RECURRING, &cx.scope, &id)?)
}

async fn arb_get(
    app: &AppState,
    caller: &Caller,
    body: &Map<String, Json>,
    status_only: bool,
) -> Result<Answer, ApiError> {
    caller.perms.require("recurrings.read")?;
    let number = tree::text(body, "subscriptionId").unwrap_or_default();
    let with_payments = tree::text(body, "includeTransactions").is_some_and(|v| v == "true" || v == "1");
    let cx = app.cx(caller);
    let found = app
        .store
        .write(move |conn| {
            let Some(r) = find_subscription(conn, &cx, &number)? else {
                return Ok(None);
            };
            let recurring = Json::Object(engine::render(&cx, &r));
            if status_only {
                return Ok(Some(Out::text(arb::status(&recurring))));
            }
            let vault_id = r.text("account_vault_id").unwrap_or_default().to_string();
            // The vault and contact, as stored (a deleted vault ends the
            // subscription; its masked card is then unknown).
            let vault = query::find(conn, &ACCOUNT_VAULT, &cx.scope, &vault_id)?
                .map(|v| Json::Object(engine::render(&cx, &v)))
                .unwrap_or(Json::Null);
            let contact_id = r.text("contact_id").unwrap_or_default().to_string();
            let contact = query::find(conn, &CONTACT, &cx.scope, &contact_id)?
                .map(|c| Json::Object(engine::render(&cx, &c)))
                .unwrap_or(Json::Null);
            let profile = arb::ProfileNumbers {
                contact: numbers::number_of(conn, Number::Contact, &contact_id)?,
                vault: numbers::number_of(conn, Number::Vault, &vault_id)?,
            };
            let payments = if with_payments {
                let payments = shown::subscription_payments(conn, &r)?;
                Some(payments.into_iter().map(|(_, p)| p).collect::<Vec<_>>())
            } else {
                None
            };
            Ok(Some(arb::subscription(
                &recurring,
                &vault,
                &contact,
                profile,
                payments.as_deref(),
            )))
        })
        .await?;
    Ok(match found {
        Some(out) if status_only => (message(api::OK), true, vec![("status", out)]),
        Some(out) => (message(api::OK), true, vec![("subscription", out)]),
        None => (message(api::NO_SUBSCRIPTION), false, Vec::new()),
    })
}

async fn arb_update(app: &AppState, caller: &Caller, body: &Map<String, Json>) -> Result<Answer, ApiError> {
    caller.perms.require("recurrings.update")?;
    let number = tree::text(body, "subscriptionId").unwrap_or_default();
    let cx = app.cx(caller);
    let Some(sub) = tree::object(body, "subscription") else {
        return Ok(arb_refused((
            api::MISSING_FIELD,
            "subscription is required.".into(),
        )));
    };
    let change = match arb::update(sub, &cx.scope.location_id) {
        Ok(c) => c,
        Err(r) => return Ok(arb_refused(r)),
    };
    if change.vault.is_some() {
        caller.perms.require("accountvaults.create")?;
    }
    if !change.contact.is_empty() {
        caller.perms.require("contacts.update")?;
    }
    let done = app
        .store
        .write(move |conn| {
            let Some(old) = find_subscription(conn, &cx, &number)? else {
                return Ok(Err(message(api::NO_SUBSCRIPTION)));
            };
            if old.text("status") == Some(transitions::ENDED) {
                return Ok(Err(message(api::CANCELED)));
            }
            let contact_id = old.text("contact_id").unwrap_or_default().to_string();
            // A new card, amount or bill-to: no longer what its duplicate
            // key describes.
            if change.vault.is_some()
                || change.recurring.contains_key("transaction_amount")
                || !change.contact.is_empty()
            {
                subscription_keys::release(conn, old.id())?;
            }
            // The name and address the subscription shows are its contact's.
            if !change.contact.is_empty() {
                if let Some(contact) = query::find(conn, &CONTACT, &cx.scope, &contact_id)? {
                    let input =
                        validate::for_update(&CONTACT, &change.contact).map_err(ApiError::Validation)?;
                    engine::update_record(&cx, conn, contact, input)?;
                }
            }
            let mut vault_id = old.text("account_vault_id").unwrap_or_default().to_string();
            let mut changes = change.recurring;
            if let Some(mut vault_body) = change.vault {
                if let Some(contact) = old.text("contact_id") {
                    vault_body.insert("contact_id".into(), Json::String(contact.to_string()));
                }
                let (vault, _) = engine::create(
                    &cx,
                    conn,
                    &ACCOUNT_VAULT,
                    create_input(&ACCOUNT_VAULT, &vault_body)?,
                )?;
                changes.insert("account_vault_id".into(), Json::String(vault.id().to_string()));
                vault_id = vault.id().to_string();
            }
            if !changes.is_empty() {
                let input = validate::for_update(&RECURRING, &changes).map_err(ApiError::Validation)?;
                engine::update_record(&cx, conn, old, input)?;
            }
            Ok(Ok(arb::ProfileNumbers {
                contact: numbers::number_of(conn, Number::Contact, &contact_id)?,
                vault: numbers::number_of(conn, Number::Vault, &vault_id)?,
            }))
        })
        .await;
    match done {
        Ok(Ok(profile)) => {
            app.schedules.wake();
            Ok((message(api::OK), true, vec![("profile", profile.to_out())]))
        }
        Ok(Err(m)) => Ok((m, false, Vec::new())),
        Err(e) => arb_error(e),
    }
}

async fn arb_cancel(app: &AppState, caller: &Caller, body: &Map<String, Json>) -> Result<Answer, ApiError> {
    caller.perms.require("recurrings.update")?;
    let number = tree::text(body, "subscriptionId").unwrap_or_default();
    let cx = app.cx(caller);
    let done = app
        .store
        .write(move |conn| {
            let Some(old) = find_subscription(conn, &cx, &number)? else {
                return Ok((message(api::NO_SUBSCRIPTION), false));
            };
            // Their E00038 for any subscription that already ended; an
            // expired one says so.
            if old.text("status") == Some(transitions::ENDED) {
                let m = if old.text("ended_reason") == Some(arb::CANCELED) {
                    message(api::ALREADY_CANCELED)
                } else {
                    (
                        api::ALREADY_CANCELED.0,
                        "The subscription has already expired; it cannot be canceled.".into(),
                    )
                };
                return Ok((m, false));
            }
            let mut new = old.clone();
            transitions::end(&mut new, arb::CANCELED);
            let new = engine::save_record(&cx, conn, &old, new)?;
            billing::after_change(conn, &new, Some(&old))?;
            Ok((message(api::OK), true))
        })
        .await?;
    app.schedules.wake();
    Ok((done.0, done.1, Vec::new()))
}

// ---------------------------------------------------------------------
// AIM

async fn transact(
    State(app): State<AppState>,
    RawQuery(q): RawQuery,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let mut pairs: Vec<(String, String)> = match &body {
        Ok(b) => form_urlencoded::parse(b)
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect(),
        Err(_) => Vec::new(),
    };
    pairs.extend(query_pairs(q.as_deref()));
    let fields = aim::Fields::new(pairs);
    let shape = aim::Shape::of(&fields);
    let outcome = if body.is_err() {
        Outcome::refused(
            None,
            &Refusal::with(codes::TRY_AGAIN, "The request could not be read."),
        )
    } else if let Some(why) = aim::unsupported(&fields) {
        Outcome::refused(None, &Refusal::with(codes::TRY_AGAIN, why))
    } else {
        let login = fields.get("x_login").map(str::to_string);
        let key = fields.get("x_tran_key").map(str::to_string);
        match caller(&app, developer_of(q.as_deref()), login, key).await {
            Ok(c) => run_transaction(&app, &c, &aim::request(&fields)).await,
            Err(ApiError::TooManyRequests(wait)) => Outcome::refused(
                None,
                &Refusal::with(
                    codes::TRY_AGAIN,
                    format!("Too many requests: retry in {wait} seconds."),
                ),
            ),
            Err(_) => Outcome::refused(None, &Refusal::new(codes::BAD_LOGIN)),
        }
    };
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        aim::answer(&fields, &outcome, &shape),
    )
        .into_response()
}
