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
use crate::db::Sql;
use crate::emulator::codes::{self, api, ResponseCode};
use crate::emulator::numbers::{self, Kind as Number};
use crate::emulator::sent::{self, Sent};
use crate::emulator::transaction::{self, Kind, Outcome, Refusal};
use crate::emulator::tree::{self, Format, Out};
use crate::emulator::{aim, arb, envelope, response_name, subscription_keys};
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

const METHODS: &[&str] = &[
    "authenticateTestRequest",
    "createTransactionRequest",
    "getTransactionDetailsRequest",
    "ARBCreateSubscriptionRequest",
    "ARBGetSubscriptionRequest",
    "ARBGetSubscriptionStatusRequest",
    "ARBUpdateSubscriptionRequest",
    "ARBCancelSubscriptionRequest",
];

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
    if !METHODS.contains(&parsed.method.as_str()) {
        return error_document(format, ref_id, message(api::UNKNOWN_METHOD));
    }
    let login = tree::text(&parsed.body, "merchantAuthentication.name");
    let key = tree::text(&parsed.body, "merchantAuthentication.transactionKey");
    let caller = match caller(&app, developer_of(q.as_deref()), login, key).await {
        Ok(c) => c,
        Err(e) => return error_document(format, ref_id, api_message(&e)),
    };
    let root = response_name(&parsed.method);
    let result = match parsed.method.as_str() {
        "authenticateTestRequest" => Ok((message(api::OK), true, Vec::new())),
        "createTransactionRequest" => Ok(create_transaction(&app, &caller, &parsed.body).await),
        "getTransactionDetailsRequest" => transaction_details(&app, &caller, &parsed.body).await,
        "ARBCreateSubscriptionRequest" => arb_create(&app, &caller, &parsed.body).await,
        "ARBGetSubscriptionRequest" => arb_get(&app, &caller, &parsed.body, false).await,
        "ARBGetSubscriptionStatusRequest" => arb_get(&app, &caller, &parsed.body, true).await,
        "ARBUpdateSubscriptionRequest" => arb_update(&app, &caller, &parsed.body).await,
        _ => arb_cancel(&app, &caller, &parsed.body).await,
    };
    match result {
        Ok((m, ok, rest)) => document(format, &root, &envelope(ref_id, ok, (m.0, &m.1), rest)),
        Err(e) => error_document(format, ref_id, api_message(&e)),
    }
}

/// What a method answers: its message, whether it succeeded, and its
/// own elements.
type Answer = (Message, bool, Vec<(&'static str, Out)>);

async fn create_transaction(app: &AppState, caller: &Caller, body: &Map<String, Json>) -> Answer {
    let outcome = match tree::object(body, "transactionRequest") {
        Some(request) => Outcome {
            user_fields: transaction::user_fields(request),
            ..run_transaction(app, caller, request).await
        },
        None => Outcome::refused(
            None,
            &Refusal::with(codes::TRY_AGAIN, "transactionRequest is required."),
        ),
    };
    let m = if outcome.ok() {
        message(api::OK)
    } else {
        message(api::FAILED)
    };
    (m, outcome.ok(), vec![("transactionResponse", outcome.to_out())])
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
            if let Some(sent) = sent {
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

async fn transaction_details(
    app: &AppState,
    caller: &Caller,
    body: &Map<String, Json>,
) -> Result<Answer, ApiError> {
    caller.perms.require("transactions.read")?;
    let number = tree::text(body, "transId").unwrap_or_default();
    let cx = app.cx(caller);
    let cx2 = cx.clone();
    let found = app
        .store
        .write(move |conn| {
            let Some(id) = numbers::record_of(conn, Number::Transaction, &number)? else {
                return Ok(None);
            };
            let Some(tx) = query::find(conn, &TRANSACTION, &cx2.scope, &id)? else {
                return Ok(None);
            };
            let previous = match tx.text("previous_transaction_id") {
                Some(p) => Some(numbers::number_of(conn, Number::Transaction, p)?),
                None => None,
            };
            let recurring = match tx.text("recurring_id") {
                Some(recurring_id) => query::find(conn, &RECURRING, &cx2.scope, recurring_id)?,
                None => None,
            };
            let subscription = match recurring {
                Some(recurring) => {
                    let payments = subscription_payments(conn, &recurring)?;
                    let own = payments.iter().position(|(id, _)| id == tx.id());
                    let numbers: Vec<_> = payments.into_iter().map(|(_, p)| p).collect();
                    match own {
                        Some(i) => Some((
                            numbers::number_of(conn, Number::Subscription, recurring.id())?,
                            arb::pay_numbers(&numbers)[i].0,
                        )),
                        None => None,
                    }
                }
                None => None,
            };
            let batch = match tx.text("transaction_batch_id") {
                Some(batch_id) => {
                    let closed = conn
                        .query_one(&Sql::with(
                            "SELECT batch_close_ts FROM transaction_batches WHERE id = ?",
                            vec![batch_id.into()],
                        ))?
                        .and_then(|r| r.first().and_then(|v| v.as_int()));
                    Some((numbers::number_of(conn, Number::Batch, batch_id)?, closed))
                }
                None => None,
            };
            let level3 = conn
                .query_one(&Sql::with(
                    "SELECT level3_data FROM transaction_level3s WHERE transaction_id = ?",
                    vec![tx.id().into()],
                ))?
                .and_then(|r| r.first().and_then(|v| v.as_str()).map(str::to_string))
                .and_then(|data| serde_json::from_str(&data).ok());
            // A partial approval opened a split tender (numbered when answered).
            let split_tender =
                if tx.int("reason_code_id") == Some(i64::from(ReasonCode::PARTIAL_APPROVAL.code())) {
                    Some(numbers::number_of(conn, Number::SplitTender, tx.id())?)
                } else {
                    None
                };
            let facts = transaction::DetailFacts {
                split_tender,
                trans_id: numbers::number_of(conn, Number::Transaction, tx.id())?,
                ref_trans_id: previous,
                sent: sent::of(conn, tx.id())?,
                subscription,
                batch,
                level3,
            };
            Ok(Some((Json::Object(engine::render(&cx2, &tx)), facts)))
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

/// A recurring's finished runs (a subscription's payments), oldest
/// first, each by our id and as their ARB payment. A run's billing period
/// is the last one whose date (in the recurring location's time zone) is
/// on or before the day it ran: the scheduler runs a period on its date
/// and retries a declined one before the next period's.
fn subscription_payments(
    conn: &mut dyn crate::db::Conn,
    recurring: &crate::engine::record::Record,
) -> Result<Vec<(String, arb::Payment)>, ApiError> {
    let plan = transitions::Plan::of(recurring);
    let tz = conn
        .query_one(&Sql::with(
            "SELECT tz FROM locations WHERE id = ?",
            vec![recurring.text("location_id").unwrap_or_default().into()],
        ))?
        .and_then(|r| r.into_iter().next())
        .and_then(|v| v.as_str().and_then(|t| t.parse::<chrono_tz::Tz>().ok()))
        .unwrap_or(chrono_tz::UTC);
    let rows = conn.query(&Sql::with(
        "SELECT id, timestamp, status_id, reason_code_id, created_ts FROM transactions \
         WHERE recurring_id = ? AND state = ? ORDER BY created_ts, id",
        vec![recurring.id().into(), crate::payments::state::DONE.into()],
    ))?;
    let mut payments = Vec::new();
    for row in rows {
        let id = row[0].as_str().unwrap_or_default().to_string();
        let ran_on = crate::billing::calendar::local_date(row[4].as_int().unwrap_or(0), tz);
        let payment = arb::Payment {
            trans_id: numbers::number_of(conn, Number::Transaction, &id)?,
            timestamp: row[1].as_str().unwrap_or_default().to_string(),
            status_id: row[2].as_int().unwrap_or(0),
            reason_code_id: row[3].as_int().unwrap_or(0),
            period: plan.interval.periods_through(plan.anchor, ran_on) - 1,
        };
        payments.push((id, payment));
    }
    Ok(payments)
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
                let payments = subscription_payments(conn, &r)?;
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
