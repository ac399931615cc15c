//! Hosted pages over HTTP (reference 7): `GET /v2/payform`,
//! `GET /v2/accountform` and `GET /hostedpaymentpage` open a form;
//! `POST /hosted/{session}` submits it; `POST /v2/tickets` keeps typed
//! card data for a vault. Forms are server-rendered, need no script and
//! no outside asset, and are embeddable in another site's iframe; every
//! refusal is a page (or JSON, to a caller that asks for JSON).
//!
//! What a form means lives in `hosted`; payments go through `payments`
//! with a hosted `trx_source_id`, vaults through the vault resource.

use super::extract::query_pairs;
use super::AppState;
use crate::auth::{authenticate_hash_key, caller_of_user, Caller, HashKeyCredentials};
use crate::db::{Conn, Sql};
use crate::engine::{self, query, Cx};
use crate::error::{ApiError, ApiResult, FieldErrors};
use crate::hosted::form::{self, EntryMethod, Field, Flags, Input, Kind, ProductDefaults};
use crate::hosted::sessions::{self, Claim, NewSession, Session};
use crate::hosted::{decode_data, hash_key, page_cipher, tickets};
use crate::money::Money;
use crate::payments::{actions, NewPayment, Origin, TrxSource};
use crate::resources::product_transactions::{default_for, settings as product_settings};
use crate::resources::{ACCOUNT_VAULT, PRODUCT_TRANSACTION, TRANSACTION};
use askama::Template;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::{json, Map, Value as Json};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/v2/payform",
            get(|s: State<AppState>, h: HeaderMap, q: RawQuery| open_form(Kind::PayForm, s, h, q)),
        )
        .route(
            "/v2/accountform",
            get(|s: State<AppState>, h: HeaderMap, q: RawQuery| open_form(Kind::AccountForm, s, h, q)),
        )
        .route("/hostedpaymentpage", get(open_payment_page))
        .route("/hosted/{session}", get(show_session).post(submit))
        .route("/hosted/assets/form.css", get(stylesheet))
        .route("/hosted/assets/form.js", get(script))
        .route("/v2/tickets", post(create_ticket).options(ticket_preflight))
}

const CSS: &str = include_str!("../../assets/hosted/form.css");
const JS: &str = include_str!("../../assets/hosted/form.js");

async fn stylesheet() -> Response {
    asset("text/css; charset=utf-8", CSS)
}

async fn script() -> Response {
    asset("text/javascript; charset=utf-8", JS)
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "public, max-age=3600"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        body,
    )
        .into_response()
}

// ---------------------------------------------------------------------
// Responses

/// A caller that asked for JSON gets the API's error bodies.
pub fn wants_json(headers: &HeaderMap) -> bool {
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    accept.contains("application/json") && !accept.contains("text/html")
}

/// Headers of every hosted page: nothing from elsewhere but the
/// request's own stylesheet; embeddable in any site's frame (the
/// reference's forms are meant for iframes); never cached.
fn page(status: StatusCode, html: Result<String, askama::Error>, stylesheet: Option<&str>) -> Response {
    framed_page(status, html, stylesheet, "*")
}

/// A page no other site may frame (the quick-invoice pay page is a page
/// of its own, not a widget).
fn own_page(status: StatusCode, html: Result<String, askama::Error>) -> Response {
    framed_page(status, html, None, "'none'")
}

fn framed_page(
    status: StatusCode,
    html: Result<String, askama::Error>,
    stylesheet: Option<&str>,
    frame_ancestors: &str,
) -> Response {
    let html = match html {
        Ok(h) => h,
        Err(e) => return ApiError::internal(e).into_response(),
    };
    let style_src = match stylesheet {
        Some(url) => format!("'self' {}", form::origin_of(url)),
        None => "'self'".to_string(),
    };
    let csp = format!(
        "default-src 'none'; script-src 'self'; style-src {style_src}; img-src 'self' data:; \
         form-action 'self'; base-uri 'none'; frame-ancestors {frame_ancestors}"
    );
    let mut response = (status, Html(html)).into_response();
    let h = response.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&csp) {
        h.insert(header::CONTENT_SECURITY_POLICY, v);
    }
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    // Browsers that predate CSP's frame-ancestors read this one.
    if frame_ancestors == "'none'" {
        h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    }
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("strict-origin-when-cross-origin"),
    );
    response
}

#[derive(Template)]
#[template(path = "hosted/refused.html")]
struct RefusedPage<'a> {
    title: &'a str,
    stylesheet_url: Option<String>,
    heading: &'a str,
    message: String,
    status: u16,
}

/// Who may frame a page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// Any site: the PayForm, AccountForm and payment page are widgets
    /// for a merchant's iframe.
    AnySite,
    /// No site: the quick-invoice pay page is a page of its own, and so
    /// are its results and refusals.
    Never,
}

fn framing_page(
    framing: Framing,
    status: StatusCode,
    html: Result<String, askama::Error>,
    stylesheet: Option<&str>,
) -> Response {
    match framing {
        Framing::AnySite => page(status, html, stylesheet),
        Framing::Never => own_page(status, html),
    }
}

/// A refusal as a page (the API's message, in words a payer can follow).
pub fn refused(json: bool, error: ApiError) -> Response {
    refused_framed(json, error, Framing::AnySite)
}

/// A refusal as a page no site may frame (the quick-invoice pay page's).
pub fn refused_unframed(json: bool, error: ApiError) -> Response {
    refused_framed(json, error, Framing::Never)
}

fn refused_framed(json: bool, error: ApiError, framing: Framing) -> Response {
    if json || matches!(error, ApiError::Internal(_)) {
        return error.into_response();
    }
    let status = error.status();
    let message = match &error {
        ApiError::Validation(errors) | ApiError::Conflict(errors) => errors
            .0
            .iter()
            .flat_map(|(field, messages)| messages.iter().map(move |m| format!("{field}: {m}")))
            .collect::<Vec<_>>()
            .join(" "),
        other => other.body()["message"].as_str().unwrap_or_default().to_string(),
    };
    let heading = match status {
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => "This payment link cannot be used",
        StatusCode::NOT_FOUND => "This payment link was not found",
        StatusCode::TOO_MANY_REQUESTS => "Too many attempts",
        _ => "This payment link is not valid",
    };
    let body = RefusedPage {
        title: heading,
        stylesheet_url: None,
        heading,
        message,
        status: status.as_u16(),
    }
    .render();
    let mut response = framing_page(framing, status, body, None);
    if let ApiError::TooManyRequests(wait) = error {
        if let Ok(v) = HeaderValue::from_str(&wait.to_string()) {
            response.headers_mut().insert(header::RETRY_AFTER, v);
        }
    }
    response
}

/// A form field as the template shows it.
struct FieldView {
    name: &'static str,
    label: String,
    value: String,
    required: bool,
    readonly: bool,
    visible: bool,
    hint: Option<&'static str>,
    error: Option<String>,
    described_by: String,
    numeric: bool,
    decimal: bool,
    account_type: bool,
    sensitive: bool,
    max_len: u32,
    autocomplete: &'static str,
}

struct ErrorLine {
    anchor: Option<String>,
    message: String,
}

#[derive(Template)]
#[template(path = "hosted/form.html")]
struct FormPage {
    title: String,
    stylesheet_url: Option<String>,
    heading: String,
    amount_text: Option<String>,
    errors: Vec<ErrorLine>,
    terminal_note: bool,
    action: String,
    fields: Vec<FieldView>,
    submit_label: String,
    close_button: bool,
    ach: bool,
    parent_origin: String,
    send_message: bool,
    nonce: Option<String>,
    surcharge_note: Option<String>,
}

#[derive(Template)]
#[template(path = "hosted/result.html")]
struct ResultPage {
    title: String,
    stylesheet_url: Option<String>,
    heading: String,
    message: String,
    approved: bool,
    details: Vec<(&'static str, String)>,
    redirect: Option<String>,
    redirect_delay: u32,
    close_button: bool,
    result_json: String,
    parent_origin: String,
    send_message: bool,
    parent_close: bool,
    close_delay: u32,
}

// ---------------------------------------------------------------------
// What an opened form is

/// A session's form, rebuilt from what it was opened with.
struct Prepared {
    kind: Kind,
    flags: Flags,
    fields: Vec<Field>,
    method: String,
    /// The transaction or vault fields the request fixed.
    base: Map<String, Json>,
    /// A payment page's own title.
    title: Option<String>,
    /// The surcharge a credit card pays here, in basis points (0 for none,
    /// and for a bank account).
    surcharge_bp: i64,
}

fn invalid_data(errors: FieldErrors) -> ApiError {
    ApiError::Validation(errors)
}

/// The product transaction settings a form's defaults come from.
fn product_defaults(
    conn: &mut dyn Conn,
    cx: &Cx,
    base: &Map<String, Json>,
    method: &str,
) -> ApiResult<ProductDefaults> {
    let location = base
        .get("location_id")
        .and_then(Json::as_str)
        .unwrap_or(&cx.scope.location_id)
        .to_string();
    let pt = match base.get("product_transaction_id").and_then(Json::as_str) {
        Some(id) => query::find(conn, &PRODUCT_TRANSACTION, &cx.scope, id)?,
        None => default_for(conn, cx, &location, method)?,
    };
    Ok(ProductDefaults::from_settings(
        &pt.map(|p| product_settings(&p)).unwrap_or(Json::Null),
    ))
}

/// Reads a PayForm's or AccountForm's data into its form. Checks what an
/// integrator got wrong, so the payer never meets it.
fn prepare_form(conn: &mut dyn Conn, cx: &Cx, kind: Kind, data: &Json, opening: bool) -> ApiResult<Prepared> {
    let mut base = data.as_object().cloned().unwrap_or_default();
    let method = base
        .get("payment_method")
        .and_then(Json::as_str)
        .unwrap_or_default()
        .to_string();
    let mut errors = FieldErrors::new();
    if !matches!(method.as_str(), "cc" | "ach") {
        errors.add("payment_method", "payment_method must be cc or ach.");
    }
    for preset in form::NEVER_PRESET.iter().filter(|f| **f != "account_holder_name") {
        if base.contains_key(*preset) || base.contains_key("cvv") && *preset == "cvv" {
            errors.add(
                *preset,
                format!("{preset} cannot be sent in a form's data: the payer types it."),
            );
        }
    }
    let defaults = product_defaults(conn, cx, &base, &method)?;
    if let Some(Json::String(id)) = base.get("product_transaction_id") {
        let found = query::find(conn, &PRODUCT_TRANSACTION, &cx.scope, id)?;
        match found.as_ref().and_then(|pt| pt.text("payment_method")) {
            None => errors.add(
                "product_transaction_id",
                "product_transaction_id provided is not valid",
            ),
            Some(m) if m != method && !method.is_empty() => errors.add(
                "product_transaction_id",
                format!("The product transaction takes {m} payments, not {method}."),
            ),
            Some(_) => {}
        }
    }
    let flags = match form::take_flags(kind, &mut base, &defaults) {
        Ok(f) => Some(f),
        Err(e) => {
            for (k, ms) in e.0 {
                for m in ms {
                    errors.add(k.clone(), m);
                }
            }
            None
        }
    };
    match kind {
        Kind::PayForm => {
            let action = base.get("action").and_then(Json::as_str).unwrap_or_default();
            // The spec's four: a PayForm takes money in, never pays it
            // out (its data is not signed, so a refund or credit here
            // would pay whoever edits the link).
            let allowed: &[&str] = if method == "ach" {
                &["debit"]
            } else {
                &["sale", "authonly", "avsonly"]
            };
            if !allowed.contains(&action) {
                errors.add(
                    "action",
                    format!(
                        "A {method} PayForm takes action {} only: a PayForm never pays money out.",
                        allowed.join(", ")
                    ),
                );
            }
            refuse_other_sources(&base, &mut errors);
            if method == "cc" {
                refuse_set_surcharge(&base, defaults.surcharge_bp, &mut errors);
            }
            if action != "avsonly" && base.get("transaction_amount").is_none_or(Json::is_null) {
                errors.add("transaction_amount", "transaction_amount is required.");
            }
            if method == "ach" && base.get("ach_sec_code").is_none_or(Json::is_null) {
                errors.add("ach_sec_code", "ach_sec_code is required for an ACH PayForm.");
            }
            if method == "ach" && base.get("product_transaction_id").is_none_or(Json::is_null) {
                errors.add(
                    "product_transaction_id",
                    "product_transaction_id is required for an ACH PayForm: an ACH product of the location.",
                );
            }
            require_unused_api_id(
                conn,
                cx,
                &base,
                &TRANSACTION,
                "transaction_api_id",
                opening,
                &mut errors,
            )?;
            if errors.is_empty() {
                // The fields and their types, as the transaction will see them.
                actions::parse(&base, false)?;
            }
        }
        Kind::AccountForm => {
            require_unused_api_id(
                conn,
                cx,
                &base,
                &ACCOUNT_VAULT,
                "account_vault_api_id",
                opening,
                &mut errors,
            )?;
            if !base.contains_key("location_id") {
                base.insert("location_id".into(), json!(cx.scope.location_id));
            }
            // The vault's own fields and their types, but for those the
            // payer types.
            // (With bad flags, their errors are reported first.)
            if let (Some(flags), Err(found)) = (&flags, engine::validate::for_create(&ACCOUNT_VAULT, &base)) {
                let typed = form::fields(kind, &method, flags, &Map::new());
                for (field, messages) in found.0 {
                    if !typed.iter().any(|f| f.name == field) {
                        for m in messages {
                            errors.add(field.clone(), m);
                        }
                    }
                }
            }
        }
        _ => {}
    }
    let flags = match flags {
        Some(flags) if errors.is_empty() => flags,
        _ => return Err(invalid_data(errors)),
    };
    let fields = form::fields(kind, &method, &flags, &base);
    let surcharge_bp = if method == "cc" { defaults.surcharge_bp } else { 0 };
    Ok(Prepared {
        kind,
        flags,
        fields,
        method,
        base,
        title: None,
        surcharge_bp,
    })
}

/// A form charges the account its payer types: no other source of the
/// money may be named in its data.
fn refuse_other_sources(base: &Map<String, Json>, errors: &mut FieldErrors) {
    for field in form::OTHER_SOURCES {
        if base.get(*field).is_some_and(|v| !v.is_null()) {
            errors.add(
                *field,
                format!(
                    "{field} cannot be sent in a form's data: the form charges the account its payer types. \
                     Charge a stored account with POST /v2/transactions."
                ),
            );
        }
    }
}

/// On a surcharged card account the surcharge depends on the card the
/// payer types (none on a debit card): the gateway works it out, so the
/// form's data may not fix it.
fn refuse_set_surcharge(base: &Map<String, Json>, surcharge_bp: i64, errors: &mut FieldErrors) {
    if surcharge_bp <= 0 {
        return;
    }
    for field in ["surcharge_amount", "subtotal_amount"] {
        if base.get(field).is_some_and(|v| !v.is_null()) {
            errors.add(
                field,
                format!(
                    "{field} cannot be sent in a form's data on this account: the gateway adds its {}% surcharge \
                     to credit cards and none to debit cards, and the form shows it to the payer.",
                    Money::from_cents(surcharge_bp)
                ),
            );
        }
    }
}

/// Runs the payments core's own checks on an opening form's data, with
/// stand-ins for what the payer types ([`form::stand_ins`]). A mistake
/// about a field the payer fills in is the payer's to correct later; any
/// other (a missing contact, a tip above the amount, a field the ACH
/// profile requires but the form does not show) no payer could fix, so
/// the link is refused to its integrator now.
fn refuse_what_no_payer_can_fix(
    conn: &mut dyn Conn,
    cx: &Cx,
    payments: &crate::payments::Payments,
    prepared: &Prepared,
    origin: &Origin,
) -> ApiResult<()> {
    let typed = form::typed_by_payer(&prepared.fields);
    let posted = form::stand_ins(&prepared.fields, &prepared.flags, &prepared.method, cx.now);
    let integrators = |found: FieldErrors| {
        let mut kept = FieldErrors::new();
        for (field, messages) in found.0 {
            if !typed.contains(&field.as_str()) {
                for m in messages {
                    kept.add(field.clone(), m);
                }
            }
        }
        kept
    };
    let found =
        match form::merge_submission(&prepared.fields, &prepared.flags, &posted, prepared.base.clone()) {
            Err(found) => integrators(found),
            Ok(merged) => match actions::parse(&merged, false) {
                Err(ApiError::Validation(found)) => integrators(found),
                Err(other) => return Err(other),
                Ok(parsed) => integrators(payments.dry_run(cx, conn, &parsed, origin)?),
            },
        };
    found.into_result()
}

/// A form's api id (how the integrator finds the result): required, and,
/// when the form is opened, not yet used at the location.
fn require_unused_api_id(
    conn: &mut dyn Conn,
    cx: &Cx,
    base: &Map<String, Json>,
    res: &'static crate::engine::resource::Resource,
    field: &str,
    opening: bool,
    errors: &mut FieldErrors,
) -> ApiResult<()> {
    let Some(api_id) = base.get(field).and_then(Json::as_str) else {
        errors.add(
            field,
            format!("{field} is required: it is how the result is found."),
        );
        return Ok(());
    };
    let location = base
        .get("location_id")
        .and_then(Json::as_str)
        .unwrap_or(&cx.scope.location_id);
    if opening && query::find_by_api_id(conn, res, &cx.scope, location, api_id)?.is_some() {
        errors.add(field, format!("{field} has already been used."));
    }
    Ok(())
}

/// A payment page's row, as opening it needs it.
struct PaymentPage {
    id: String,
    location_id: String,
    product_transaction_id: String,
    title: String,
    key: String,
    settings: Map<String, Json>,
    created_user_id: Option<String>,
    active: bool,
}

fn load_payment_page(
    conn: &mut dyn Conn,
    keyring: &crate::crypto::Keyring,
    id: &str,
) -> ApiResult<Option<PaymentPage>> {
    if !crate::ids::looks_like_id(id) {
        return Ok(None);
    }
    let row = conn.query_one(&Sql::with(
        "SELECT id, location_id, product_transaction_id, title, encryption_key, redirect_url_on_approve, \
         redirect_url_on_decline, redirect_url_delay, min_payment_amount, max_payment_amount, parent_send_message, \
         stylesheet_url, created_user_id, active FROM hosted_payment_pages WHERE id = ?",
        vec![id.into()],
    ))?;
    let Some(r) = row else { return Ok(None) };
    let text = |i: usize| r[i].as_str().map(str::to_string);
    let mut settings = Map::new();
    for (i, name) in [
        (5, "redirect_url_on_approve"),
        (6, "redirect_url_on_decline"),
        (11, "stylesheet_url"),
    ] {
        if let Some(v) = text(i).filter(|v| !v.is_empty()) {
            settings.insert(name.into(), json!(v));
        }
    }
    if let Some(d) = r[7].as_int() {
        settings.insert("redirect_url_delay".into(), json!(d));
    }
    for (i, name) in [(8, "min_payment_amount"), (9, "max_payment_amount")] {
        if let Some(cents) = r[i].as_int() {
            settings.insert(name.into(), json!(Money::from_cents(cents).to_text()));
        }
    }
    settings.insert("parent_send_message".into(), json!(r[10].as_int() == Some(1)));
    let key = text(4).and_then(|k| keyring.decrypt(&k).ok()).unwrap_or_default();
    Ok(Some(PaymentPage {
        id: text(0).unwrap_or_default(),
        location_id: text(1).unwrap_or_default(),
        product_transaction_id: text(2).unwrap_or_default(),
        title: text(3).unwrap_or_default(),
        key,
        settings,
        created_user_id: text(12),
        active: r[13].as_int() != Some(0),
    }))
}

/// Reads a payment page link's decrypted data into its form: the page's
/// settings, overridden by the link's, and the link's field overrides.
fn prepare_payment_page(
    conn: &mut dyn Conn,
    cx: &Cx,
    page: &PaymentPage,
    data: &Json,
) -> ApiResult<Prepared> {
    let pt = query::find(
        conn,
        &PRODUCT_TRANSACTION,
        &cx.scope,
        &page.product_transaction_id,
    )?
    .ok_or_else(|| ApiError::NotFound("The page's product transaction no longer exists.".into()))?;
    let method = pt.text("payment_method").unwrap_or("cc").to_string();
    let defaults = ProductDefaults::from_settings(&product_settings(&pt));
    let mut settings = page.settings.clone();
    let link = data.as_object().cloned().unwrap_or_default();
    for name in form::FLAG_NAMES {
        if let Some(v) = link.get(*name) {
            settings.insert(name.to_string(), v.clone());
        }
    }
    // The page's own name for the approval redirect.
    if let Some(v) = settings.remove("redirect_url_on_approve") {
        settings.insert("redirect_url_on_approval".into(), v);
    }
    let flags = form::take_flags(Kind::PaymentPage, &mut settings, &defaults).map_err(invalid_data)?;
    let mut fields = form::fields(Kind::PaymentPage, &method, &flags, &Map::new());
    let mut hidden = Map::new();
    form::apply_overrides(
        &mut fields,
        link.get("field_configuration").unwrap_or(&Json::Null),
        &mut hidden,
    )
    .map_err(invalid_data)?;
    form::check_fixed_amount(&fields, &flags).map_err(invalid_data)?;
    let mut base = Map::new();
    base.insert("payment_method".into(), json!(method));
    base.insert(
        "action".into(),
        json!(if method == "ach" { "debit" } else { "sale" }),
    );
    if method == "ach" {
        base.insert("ach_sec_code".into(), json!("WEB"));
    }
    base.insert("location_id".into(), json!(page.location_id));
    base.insert(
        "product_transaction_id".into(),
        json!(page.product_transaction_id),
    );
    for (k, v) in hidden {
        if matches!(
            k.as_str(),
            "location_id" | "product_transaction_id" | "payment_method"
        ) {
            return Err(ApiError::field(
                k,
                "A payment page's location, product and payment method are its own.",
            ));
        }
        base.insert(k, v);
    }
    let mut errors = FieldErrors::new();
    refuse_other_sources(&base, &mut errors);
    let surcharge_bp = if method == "cc" { defaults.surcharge_bp } else { 0 };
    refuse_set_surcharge(&base, surcharge_bp, &mut errors);
    errors.into_result()?;
    Ok(Prepared {
        kind: Kind::PaymentPage,
        flags,
        fields,
        method,
        base,
        title: Some(page.title.clone()),
        surcharge_bp,
    })
}

/// Rebuilds an open session's form (each request sees the product's
/// settings as they are now).
fn prepare_session(
    conn: &mut dyn Conn,
    cx: &Cx,
    keyring: &crate::crypto::Keyring,
    session: &Session,
) -> ApiResult<Prepared> {
    match session.kind {
        Kind::PaymentPage => {
            let page = load_payment_page(conn, keyring, session.page_id.as_deref().unwrap_or_default())?
                .filter(|p| p.active)
                .ok_or_else(|| ApiError::NotFound("This payment page is no longer available.".into()))?;
            prepare_payment_page(conn, cx, &page, &session.data)
        }
        kind => prepare_form(conn, cx, kind, &session.data, false),
    }
}

/// The origin of the page that embeds a form, from the Referer of the
/// request that opened it (the browser sends the embedding page's).
fn parent_origin(headers: &HeaderMap) -> Option<String> {
    let referer = headers.get(header::REFERER)?.to_str().ok()?;
    let url = form::check_url(referer).ok()?;
    Some(form::origin_of(&url))
}

// ---------------------------------------------------------------------
// Opening

fn hash_credentials(headers: &HeaderMap, pairs: &[(String, String)]) -> HashKeyCredentials {
    let get = |name: &str| super::extract::header_or_query(headers, pairs, name);
    HashKeyCredentials {
        developer_id: get("developer-id"),
        user_id: get("user-id"),
        timestamp: get("timestamp"),
        hash_key: get("hash-key"),
    }
}

/// `GET /v2/payform` and `GET /v2/accountform`.
async fn open_form(
    kind: Kind,
    State(app): State<AppState>,
    headers: HeaderMap,
    RawQuery(q): RawQuery,
) -> Response {
    let json = wants_json(&headers);
    match open_form_inner(kind, &app, &headers, q).await {
        Ok(response) => response,
        Err(e) => refused(json, e),
    }
}

async fn open_form_inner(
    kind: Kind,
    app: &AppState,
    headers: &HeaderMap,
    q: Option<String>,
) -> ApiResult<Response> {
    let pairs = query_pairs(q.as_deref());
    let creds = hash_credentials(headers, &pairs);
    let data_hex = pairs
        .iter()
        .find(|(k, _)| k == "data")
        .map(|(_, v)| v.clone())
        .ok_or_else(|| ApiError::BadRequest("data is required: the hex of the form's JSON.".into()))?;
    let parent = parent_origin(headers);
    let (app2, keyring, clock) = (app.clone(), app.keyring.clone(), app.clock.clone());
    let (session, prepared) = app
        .store
        .write(move |conn| {
            let (caller, timestamp) = authenticate_hash_key(conn, &keyring, &creds, &clock)?;
            caller.perms.require(kind.permission())?;
            let cx = app2.cx(&caller);
            let digest = hash_key::digest(creds.hash_key.as_deref().unwrap_or_default());
            let data = decode_data(&data_hex, kind.envelope())?;
            // A link opened again (a reload) shows its form as first opened.
            // The hash-key signs the user and the timestamp, not the data:
            // two links made in the same second share it, and the second
            // must never show, or pay into, the first one's form.
            if let Some(session) = sessions::opened_by(conn, &digest, kind)? {
                if session.data != Json::Object(data.clone()) {
                    return Err(sessions::hash_key_taken());
                }
                let prepared = prepare_form(conn, &cx, kind, &session.data, false)?;
                return Ok((session, prepared));
            }
            let prepared = prepare_form(conn, &cx, kind, &Json::Object(data.clone()), true)?;
            if kind == Kind::PayForm {
                let origin = Origin::from(TrxSource::PayForm);
                refuse_what_no_payer_can_fix(conn, &cx, &app2.payments, &prepared, &origin)?;
            }
            let session = sessions::open(
                conn,
                NewSession {
                    kind,
                    hash_digest: Some(digest),
                    user_id: caller.user_id.clone(),
                    developer_id: caller.developer_id.clone(),
                    location_id: caller.scope.location_id.clone(),
                    page_id: None,
                    data: Json::Object(data),
                    parent_origin: parent,
                    now: cx.now,
                    expires_ts: timestamp + hash_key::HASH_LIFETIME_S,
                },
            )?;
            Ok((session, prepared))
        })
        .await?;
    Ok(render_form(
        &session,
        &prepared,
        &FieldErrors::new(),
        &[],
        StatusCode::OK,
    ))
}

/// `GET /hostedpaymentpage?id=...&data=...`.
async fn open_payment_page(
    State(app): State<AppState>,
    headers: HeaderMap,
    RawQuery(q): RawQuery,
) -> Response {
    let json = wants_json(&headers);
    match open_payment_page_inner(&app, &headers, q).await {
        Ok(response) => response,
        Err(e) => refused(json, e),
    }
}

/// How long a payment page link lives after its `timestamp`, and how long
/// an opened page can be submitted.
const PAGE_LINK_S: i64 = 15 * 60;

async fn open_payment_page_inner(
    app: &AppState,
    headers: &HeaderMap,
    q: Option<String>,
) -> ApiResult<Response> {
    let pairs = query_pairs(q.as_deref());
    let param = |name: &str| pairs.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    let id =
        param("id").ok_or_else(|| ApiError::BadRequest("id is required: the payment page's id.".into()))?;
    let data = param("data");
    if data.as_ref().is_some_and(|d| d.len() > page_cipher::MAX_DATA) {
        return Err(ApiError::BadRequest(format!(
            "data must be at most {} characters.",
            page_cipher::MAX_DATA
        )));
    }
    if id.len() > 36 {
        return Err(ApiError::NotFound("No payment page has this id.".into()));
    }
    let parent = parent_origin(headers);
    let (app2, keyring) = (app.clone(), app.keyring.clone());
    let not_found = || ApiError::NotFound("No payment page has this id.".into());
    let (session, prepared) = app
        .store
        .write(move |conn| {
            let page = load_payment_page(conn, &keyring, &id)?.ok_or_else(not_found)?;
            if !page.active {
                return Err(ApiError::NotFound("This payment page is not active.".into()));
            }
            let user = page
                .created_user_id
                .clone()
                .ok_or_else(|| ApiError::Forbidden("This payment page has no user to act as.".into()))?;
            let caller = caller_of_user(conn, None, &user)?;
            caller.perms.require("transactions.create")?;
            let cx = app2.cx(&caller);
            let link = match data {
                // A page is opened by a link its merchant sealed: without
                // one, a payer could drop the link's fixed amount, hidden
                // fields and expiry.
                None => {
                    return Err(ApiError::BadRequest(
                        "data is required: the page's link, its JSON (at least {\"id\": PAGE}) encrypted with the page's key."
                            .into(),
                    ))
                }
                Some(sealed) => {
                    let plain = page_cipher::decrypt(&page.key, &sealed).ok_or_else(|| {
                        ApiError::Unauthorized(
                            "data could not be decrypted with this page's encryption key.".into(),
                        )
                    })?;
                    // CBC has no integrity check: another key can pass the
                    // padding by chance and yield bytes that are not text.
                    // Only UTF-8 text counts as decrypted.
                    let text = String::from_utf8(plain).map_err(|_| {
                        ApiError::Unauthorized(
                            "data could not be decrypted with this page's encryption key.".into(),
                        )
                    })?;
                    serde_json::from_str::<Json>(&text)
                        .ok()
                        .filter(Json::is_object)
                        .ok_or_else(|| ApiError::BadRequest("data must decrypt to a JSON object.".into()))?
                }
            };
            if link.get("id").and_then(Json::as_str) != Some(page.id.as_str()) {
                return Err(ApiError::Unauthorized(
                    "data was made for another payment page.".into(),
                ));
            }
            let link_timestamp = match link.get("timestamp") {
                None => None,
                Some(ts) => {
                    let ts = ts
                        .as_i64()
                        .or_else(|| ts.as_str().and_then(|s| s.parse().ok()))
                        .ok_or_else(|| ApiError::field("timestamp", "timestamp must be epoch seconds."))?;
                    if cx.now - ts > PAGE_LINK_S || ts - cx.now > hash_key::TIMESTAMP_WINDOW_S {
                        return Err(ApiError::Unauthorized(
                            "This payment link has expired: links work for 15 minutes after they are made."
                                .into(),
                        ));
                    }
                    Some(ts)
                }
            };
            let prepared = prepare_payment_page(conn, &cx, &page, &link)?;
            let origin = Origin {
                hosted_payment_page_id: Some(page.id.clone()),
                ..Origin::from(TrxSource::HostedPaymentPage)
            };
            refuse_what_no_payer_can_fix(conn, &cx, &app2.payments, &prepared, &origin)?;
            // A link with a timestamp lives 15 minutes from when it was
            // made, not from when it is opened.
            let expires_ts = match link_timestamp {
                Some(ts) => (ts + PAGE_LINK_S).min(cx.now + PAGE_LINK_S),
                None => cx.now + PAGE_LINK_S,
            };
            let session = sessions::open(
                conn,
                NewSession {
                    kind: Kind::PaymentPage,
                    hash_digest: None,
                    user_id: caller.user_id.clone(),
                    developer_id: caller.developer_id.clone(),
                    location_id: page.location_id.clone(),
                    page_id: Some(page.id.clone()),
                    data: link,
                    parent_origin: parent,
                    now: cx.now,
                    expires_ts,
                },
            )?;
            Ok((session, prepared))
        })
        .await?;
    Ok(render_form(
        &session,
        &prepared,
        &FieldErrors::new(),
        &[],
        StatusCode::OK,
    ))
}

/// A form as the pages render it, whoever serves it (the hosted forms,
/// the quick-invoice pay page).
pub struct FormView<'a> {
    /// Where the form posts.
    pub session_action: String,
    pub heading: String,
    pub fields: &'a [form::Field],
    pub flags: &'a Flags,
    pub method: &'a str,
    pub submit_label: String,
    pub parent_origin: String,
}

/// The fields and the error summary of a form, with what the payer typed
/// written back (never card or bank data).
fn form_parts(
    fields: &[form::Field],
    errors: &FieldErrors,
    posted: &[(String, String)],
) -> (Vec<FieldView>, Vec<ErrorLine>) {
    let posted_value = |name: &str| posted.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    let views = fields
        .iter()
        .map(|f| {
            let error = errors.0.get(f.name).map(|m| m.join(" "));
            let value = if f.sensitive {
                String::new()
            } else if f.readonly {
                f.value.clone().unwrap_or_default()
            } else {
                posted_value(f.name)
                    .or_else(|| f.value.clone())
                    .unwrap_or_default()
            };
            let mut described = Vec::new();
            if f.hint.is_some() {
                described.push(format!("fg-{}-hint", f.name));
            }
            if error.is_some() {
                described.push(format!("fg-{}-error", f.name));
            }
            FieldView {
                name: f.name,
                label: f.label.clone(),
                value,
                required: f.required,
                readonly: f.readonly,
                visible: f.visible,
                hint: f.hint,
                error,
                described_by: described.join(" "),
                numeric: f.input == Input::Digits,
                decimal: f.input == Input::Amount,
                account_type: f.input == Input::AccountType,
                sensitive: f.sensitive,
                max_len: f.max_len,
                autocomplete: f.autocomplete,
            }
        })
        .collect();
    // The summary reads in page order (WCAG 1.3.2): what concerns the
    // whole form first, then each field's problems as the fields come.
    let shown: Vec<&str> = fields.iter().filter(|f| f.visible).map(|f| f.name).collect();
    let mut lines: Vec<ErrorLine> = errors
        .0
        .iter()
        .filter(|(field, _)| !shown.contains(&field.as_str()))
        .flat_map(|(_, messages)| {
            messages.iter().map(|m| ErrorLine {
                anchor: None,
                message: m.clone(),
            })
        })
        .collect();
    for name in shown {
        for m in errors.0.get(name).into_iter().flatten() {
            lines.push(ErrorLine {
                anchor: Some(format!("fg-{name}")),
                message: m.clone(),
            });
        }
    }
    (views, lines)
}

fn render_form(
    session: &Session,
    prepared: &Prepared,
    errors: &FieldErrors,
    posted: &[(String, String)],
    status: StatusCode,
) -> Response {
    let amount = prepared
        .base
        .get("transaction_amount")
        .and_then(|v| crate::money::parse(v, 99_999_999_999).ok())
        .map(|c| format!("${}", Money::from_cents(c)));
    let action = prepared
        .base
        .get("action")
        .and_then(Json::as_str)
        .unwrap_or("sale");
    let surcharge_note = match prepared.kind {
        Kind::PayForm if matches!(action, "sale" | "authonly") => {
            let cents = prepared
                .base
                .get("transaction_amount")
                .and_then(|v| crate::money::parse(v, 99_999_999_999).ok());
            let tax = prepared
                .base
                .get("tax")
                .and_then(|v| crate::money::parse(v, 99_999_999_999).ok())
                .unwrap_or(0);
            cents.and_then(|c| surcharge_note(prepared.surcharge_bp, c, tax))
        }
        Kind::PaymentPage => {
            // A fixed amount (read-only or hidden) is known now; a typed
            // one only once the payer types it.
            // A field's value when the payer cannot change it (a hidden
            // entry the page has no field for is in `base`), None when
            // the payer types it.
            let fixed = |name: &str| match prepared.fields.iter().find(|f| f.name == name) {
                None => Some(
                    prepared
                        .base
                        .get(name)
                        .and_then(|v| crate::money::parse(v, 99_999_999_999).ok()),
                ),
                Some(f) if f.readonly || !f.visible => Some(
                    f.value
                        .as_deref()
                        .and_then(|v| crate::money::parse_text(v.trim(), 99_999_999_999).ok()),
                ),
                Some(_) => None,
            };
            // Tax is not surcharged: the note needs the tax the page sends.
            match (fixed("transaction_amount"), fixed("tax")) {
                (Some(Some(c)), Some(tax)) => surcharge_note(prepared.surcharge_bp, c, tax.unwrap_or(0)),
                _ => typed_surcharge_note(prepared.surcharge_bp, None),
            }
        }
        _ => None,
    };
    let (heading, submit_label) = match prepared.kind {
        Kind::AccountForm => ("Save a payment account".to_string(), "Save account".to_string()),
        Kind::PaymentPage => (
            prepared.title.clone().unwrap_or_else(|| "Payment".into()),
            "Pay".to_string(),
        ),
        _ => {
            let label = match (action, &amount) {
                ("avsonly", _) => "Verify card".to_string(),
                // The total depends on the card: the note says both.
                (_, Some(_)) if surcharge_note.is_some() => "Pay".to_string(),
                (_, Some(a)) => format!("Pay {a}"),
                _ => "Pay".to_string(),
            };
            ("Payment".to_string(), label)
        }
    };
    let view = FormView {
        session_action: format!("/hosted/{}", session.id),
        heading,
        fields: &prepared.fields,
        flags: &prepared.flags,
        method: &prepared.method,
        submit_label,
        parent_origin: session.parent_origin.clone().unwrap_or_default(),
    };
    let amount_text = if prepared.kind == Kind::PaymentPage {
        None
    } else {
        amount
    };
    render_form_view(&view, amount_text, surcharge_note, errors, posted, status)
}

/// What a credit card's surcharge adds to a known `total` (`tax`
/// included, and not surcharged), said before the payer submits: the
/// reference's fee is "calculated and displayed". Whether a card is debit
/// (never surcharged) is known only once it is typed, so both totals.
pub fn surcharge_note(bp: i64, total: i64, tax: i64) -> Option<String> {
    let subtotal = total - tax;
    if bp <= 0 || subtotal <= 0 {
        return None;
    }
    let fee = crate::payments::surcharge::amount(subtotal, bp);
    Some(format!(
        "Credit cards: a {}% surcharge of ${} applies, total ${}. Debit cards: ${}, no surcharge.",
        Money::from_cents(bp),
        Money::from_cents(fee),
        Money::from_cents(total + fee),
        Money::from_cents(total)
    ))
}

/// The surcharge of an amount the payer types, with what it comes to on
/// `example` (an invoice's balance), if there is one.
pub fn typed_surcharge_note(bp: i64, example: Option<i64>) -> Option<String> {
    if bp <= 0 {
        return None;
    }
    let rate = Money::from_cents(bp);
    Some(match example.filter(|c| *c > 0) {
        Some(c) => {
            let fee = crate::payments::surcharge::amount(c, bp);
            format!(
                "Credit cards: a {rate}% surcharge is added to the amount you pay (on ${}: ${}, total ${}). \
                 Debit cards: no surcharge.",
                Money::from_cents(c),
                Money::from_cents(fee),
                Money::from_cents(c + fee)
            )
        }
        None => format!(
            "Credit cards: a {rate}% surcharge is added to the amount you pay. Debit cards: no surcharge."
        ),
    })
}

fn render_form_view(
    view: &FormView,
    amount_text: Option<String>,
    surcharge_note: Option<String>,
    errors: &FieldErrors,
    posted: &[(String, String)],
    status: StatusCode,
) -> Response {
    let (fields, errors) = form_parts(view.fields, errors, posted);
    let body = FormPage {
        title: view.heading.clone(),
        stylesheet_url: view.flags.stylesheet_url.clone(),
        heading: view.heading.clone(),
        amount_text,
        errors,
        terminal_note: view.flags.entry_method != EntryMethod::Manual,
        action: view.session_action.clone(),
        fields,
        submit_label: view.submit_label.clone(),
        close_button: view.flags.display_close_button,
        ach: view.method == "ach",
        parent_origin: view.parent_origin.clone(),
        send_message: view.flags.parent_send_message,
        nonce: None,
        surcharge_note,
    }
    .render();
    page(status, body, view.flags.stylesheet_url.as_deref())
}

#[derive(Template)]
#[template(path = "hosted/invoice.html")]
struct InvoicePage {
    title: String,
    stylesheet_url: Option<String>,
    heading: String,
    invoice: super::quickinvoices::InvoiceView,
    errors: Vec<ErrorLine>,
    terminal_note: bool,
    action: String,
    fields: Vec<FieldView>,
    submit_label: String,
    close_button: bool,
    ach: bool,
    /// A new one each time the form is shown: a double submit of one form
    /// is one payment.
    nonce: Option<String>,
    surcharge_note: Option<String>,
}

/// The quick-invoice pay page: the invoice, then its payment form.
pub fn render_invoice_page(
    view: &FormView,
    surcharge_note: Option<String>,
    errors: &FieldErrors,
    posted: &[(String, String)],
    status: StatusCode,
    invoice: super::quickinvoices::InvoiceView,
) -> Response {
    let (fields, errors) = form_parts(view.fields, errors, posted);
    let body = InvoicePage {
        title: view.heading.clone(),
        stylesheet_url: None,
        heading: view.heading.clone(),
        invoice,
        errors,
        terminal_note: false,
        action: view.session_action.clone(),
        fields,
        submit_label: view.submit_label.clone(),
        close_button: false,
        ach: view.method == "ach",
        nonce: Some(crate::crypto::random_secret(32)),
        surcharge_note,
    }
    .render();
    own_page(status, body)
}

// ---------------------------------------------------------------------
// Submitting

/// `POST /hosted/{session}`: the payer's form.
async fn submit(
    State(app): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    let json = wants_json(&headers);
    match submit_inner(&app, id, &body).await {
        Ok(response) => response,
        Err(e) => refused(json, e),
    }
}

/// A session and its form, as the user it acts for sees them now.
async fn load_session(app: &AppState, id: String) -> ApiResult<(Session, Prepared, Cx)> {
    let gone =
        || ApiError::NotFound("This form has expired or does not exist. Start the payment again.".into());
    let (app2, keyring) = (app.clone(), app.keyring.clone());
    app.store
        .read(move |conn| {
            let session = sessions::find(conn, &id)?.ok_or_else(gone)?;
            // A payment page acts as its user without a developer id.
            let developer = Some(session.developer_id.as_str()).filter(|d| !d.is_empty());
            let caller = caller_of_user(conn, developer, &session.user_id)?;
            if session.result.is_none() {
                caller.perms.require(session.kind.permission())?;
            }
            let cx = app2.cx(&caller);
            let prepared = prepare_session(conn, &cx, &keyring, &session)?;
            Ok((session, prepared, cx))
        })
        .await
}

fn expired_form() -> ApiError {
    ApiError::Unauthorized(
        "This form has expired: a form link works for 15 minutes. Start the payment again.".into(),
    )
}

/// `GET /hosted/{session}`: the address a submitted form leaves in the
/// browser, reloaded (or opened again in a tab). Its result once it has
/// one; the form while it can still be submitted; else why not, as a
/// page.
async fn show_session(State(app): State<AppState>, headers: HeaderMap, Path(id): Path<String>) -> Response {
    let json = wants_json(&headers);
    let shown = async {
        let (session, prepared, cx) = load_session(&app, id).await?;
        if let Some(result) = &session.result {
            return Ok(render_result(&session, &prepared, result));
        }
        if session.expires_ts < cx.now {
            return Err(expired_form());
        }
        Ok(render_form(
            &session,
            &prepared,
            &FieldErrors::new(),
            &[],
            StatusCode::OK,
        ))
    };
    match shown.await {
        Ok(response) => response,
        Err(e) => refused(json, e),
    }
}

async fn submit_inner(app: &AppState, id: String, body: &[u8]) -> ApiResult<Response> {
    let posted: Vec<(String, String)> = form_urlencoded::parse(body)
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    let (session, prepared, cx) = load_session(app, id).await?;
    if let Some(result) = &session.result {
        return Ok(render_result(&session, &prepared, result));
    }
    let merged =
        match form::merge_submission(&prepared.fields, &prepared.flags, &posted, prepared.base.clone()) {
            Ok(m) => m,
            Err(errors) => {
                return Ok(render_form(
                    &session,
                    &prepared,
                    &errors,
                    &posted,
                    StatusCode::UNPROCESSABLE_ENTITY,
                ))
            }
        };
    let (claim_session, now) = (session.clone(), cx.now);
    let claim = app
        .store
        .write(move |conn| sessions::claim(conn, &claim_session, now))
        .await?;
    match claim {
        Claim::Held => {}
        Claim::Used(Some(result)) => return Ok(render_result(&session, &prepared, &result)),
        Claim::Used(None) => return Err(sessions::hash_key_used()),
        Claim::Busy => {
            return Err(ApiError::Conflict({
                let mut e = FieldErrors::new();
                e.add(
                    "form",
                    "This form is being submitted already; wait a moment and reload.",
                );
                e
            }))
        }
        Claim::Expired => return Err(expired_form()),
    }
    let outcome = if prepared.kind.makes_payment() {
        charge(app, &cx, &prepared, session.page_id.clone(), merged).await
    } else {
        store_vault(app, &cx, merged).await
    };
    let session_id = session.id.clone();
    match outcome {
        Ok(result) => {
            let (stored, now) = (result.clone(), cx.now);
            app.store
                .write(move |conn| sessions::finish(conn, &session_id, now, &stored))
                .await?;
            Ok(render_result(&session, &prepared, &result))
        }
        Err(e) => {
            // Only a refusal changed nothing for sure; after anything else
            // (a failure once the processor may have answered) the form
            // stays claimed until its lease ends, so it cannot charge twice.
            if e.status().is_client_error() {
                app.store
                    .write(move |conn| sessions::release(conn, &session_id))
                    .await?;
            }
            match e {
                ApiError::Internal(_) => Err(e),
                ApiError::Validation(errors) | ApiError::Conflict(errors) => Ok(render_form(
                    &session,
                    &prepared,
                    &errors,
                    &posted,
                    StatusCode::UNPROCESSABLE_ENTITY,
                )),
                other => {
                    let status = other.status();
                    let mut errors = FieldErrors::new();
                    errors.add(
                        "form",
                        other.body()["message"]
                            .as_str()
                            .unwrap_or("The payment could not be made.")
                            .to_string(),
                    );
                    Ok(render_form(&session, &prepared, &errors, &posted, status))
                }
            }
        }
    }
}

/// The payment, through the payments core like every other.
async fn charge(
    app: &AppState,
    cx: &Cx,
    prepared: &Prepared,
    page_id: Option<String>,
    body: Map<String, Json>,
) -> ApiResult<Json> {
    let input = actions::parse(&body, false)?;
    let source = if prepared.kind == Kind::PaymentPage {
        TrxSource::HostedPaymentPage
    } else {
        TrxSource::PayForm
    };
    let request = NewPayment {
        input,
        origin: Origin {
            hosted_payment_page_id: page_id,
            ..Origin::from(source)
        },
        idempotency: None,
    };
    Ok(app.payments.create(cx.clone(), request).await?.body)
}

/// The vault, through the vault resource like `POST /v2/accountvaults`.
async fn store_vault(app: &AppState, cx: &Cx, body: Map<String, Json>) -> ApiResult<Json> {
    let input = engine::validate::for_create(&ACCOUNT_VAULT, &body).map_err(ApiError::Validation)?;
    let cx2 = cx.clone();
    let (record, _) = app
        .store
        .write(move |conn| engine::create(&cx2, conn, &ACCOUNT_VAULT, input))
        .await?;
    Ok(json!({ "accountvault": engine::render(cx, &record) }))
}

/// JSON safe inside a `<script>` element.
fn script_json(value: &Json) -> String {
    value
        .to_string()
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

fn render_result(session: &Session, prepared: &Prepared, result: &Json) -> Response {
    render_result_page(
        result,
        &prepared.flags,
        session.parent_origin.as_deref(),
        Framing::AnySite,
    )
}

/// A stored amount of a transaction, in cents.
fn cents_of(tx: &Json, field: &str) -> Option<i64> {
    tx[field]
        .as_str()
        .and_then(|t| crate::money::parse_text(t, i64::MAX / 100).ok())
}

/// What a payment's result page says: approved or not, in words that fit
/// what was done (a card verified is not a payment), and the amounts: the
/// total actually charged, with the surcharge that is part of it.
fn transaction_result(tx: &Json) -> (bool, String, String, Vec<(&'static str, String)>) {
    // Approval is decided by status_id, as the spec says: a partial
    // approval (reason 1201) or an ACH debit pending origination went
    // through too.
    let approved = tx["status_id"]
        .as_u64()
        .and_then(|s| u16::try_from(s).ok())
        .and_then(crate::processor::StatusId::from_code)
        .is_some_and(crate::processor::StatusId::is_approved);
    let verification = tx["type_id"].as_u64() == Some(u64::from(crate::processor::TypeId::AvsOnly.code()));
    let saved = tx["account_vault_id"].as_str().is_some_and(|v| !v.is_empty());
    let mut details = Vec::new();
    if !verification {
        let surcharge = cents_of(tx, "surcharge_amount");
        let subtotal = cents_of(tx, "subtotal_amount");
        match (approved, subtotal, surcharge) {
            (true, Some(subtotal), Some(surcharge)) => {
                details.push(("Subtotal", format!("${}", Money::from_cents(subtotal))));
                let line = if surcharge > 0 {
                    format!("${}", Money::from_cents(surcharge))
                } else {
                    "None".to_string()
                };
                details.push(("Card surcharge", line));
                if let Some(a) = tx["transaction_amount"].as_str() {
                    details.push(("Total charged", format!("${a}")));
                }
            }
            _ => {
                if let Some(a) = tx["transaction_amount"].as_str() {
                    details.push(("Amount", format!("${a}")));
                }
            }
        }
    }
    if let Some(l) = tx["last_four"].as_str() {
        let kind = tx["account_type"].as_str().unwrap_or("Account");
        details.push(("Account", format!("{kind} ending {l}")));
    }
    if let Some(code) = tx["auth_code"].as_str().filter(|_| approved) {
        details.push(("Authorization", code.to_string()));
    }
    if let Some(id) = tx["id"].as_str() {
        details.push(("Reference", id.to_string()));
    }
    let verbiage = tx["verbiage"].as_str().unwrap_or_default().to_string();
    let why = |fallback: &str| {
        if verbiage.is_empty() {
            fallback.to_string()
        } else {
            verbiage.clone()
        }
    };
    let (heading, message) = match (verification, approved) {
        (true, true) if saved => (
            "Card verified and saved",
            "The card was verified and stored securely. Nothing was charged.".to_string(),
        ),
        (true, true) => (
            "Card verified",
            "The card was verified. Nothing was charged.".to_string(),
        ),
        (true, false) => (
            "Card not verified",
            format!(
                "The card could not be verified ({}). Nothing was charged.",
                why("it was declined")
            ),
        ),
        (false, true) if saved => (
            "Payment approved",
            "Thank you: the payment went through, and the account was saved for later payments.".to_string(),
        ),
        (false, true) => (
            "Payment approved",
            "Thank you: the payment went through.".to_string(),
        ),
        (false, false) => (
            "Payment declined",
            format!(
                "The payment did not go through ({}). No money was taken.",
                why("the payment was declined")
            ),
        ),
    };
    (approved, heading.to_string(), message, details)
}

/// The page after a payment or a stored vault: what happened, the
/// redirect and close the flags ask for, and the API's answer for the
/// embedding page.
pub fn render_result_page(
    result: &Json,
    flags: &Flags,
    parent_origin: Option<&str>,
    framing: Framing,
) -> Response {
    let (approved, heading, message, details) = match result.get("transaction") {
        Some(tx) => transaction_result(tx),
        None => {
            let vault = &result["accountvault"];
            let mut details = Vec::new();
            if let Some(l) = vault["last_four"].as_str() {
                details.push((
                    "Account",
                    format!(
                        "{} ending {l}",
                        vault["account_type"].as_str().unwrap_or("Account")
                    ),
                ));
            }
            let (heading, message) = if vault["payment_method"].as_str() == Some("ach") {
                (
                    "Bank account saved",
                    "The bank account was stored securely. Nothing was charged.",
                )
            } else {
                ("Card saved", "The card was stored securely. Nothing was charged.")
            };
            (true, heading.to_string(), message.to_string(), details)
        }
    };
    let redirect = if approved {
        flags.redirect_url_on_approval.clone()
    } else {
        flags.redirect_url_on_decline.clone()
    };
    let body = ResultPage {
        title: heading.clone(),
        stylesheet_url: flags.stylesheet_url.clone(),
        heading,
        message,
        approved,
        details,
        redirect: redirect.clone(),
        redirect_delay: flags.redirect_url_delay,
        close_button: flags.display_close_button,
        result_json: script_json(result),
        parent_origin: parent_origin.unwrap_or_default().to_string(),
        send_message: flags.parent_send_message,
        parent_close: flags.parent_close,
        close_delay: flags.parent_close_delay,
    }
    .render();
    let mut response = framing_page(framing, StatusCode::OK, body, flags.stylesheet_url.as_deref());
    if let Some(url) = redirect {
        if let Ok(v) = HeaderValue::from_str(&format!("{};url={url}", flags.redirect_url_delay)) {
            response.headers_mut().insert(header::REFRESH, v);
        }
    }
    response
}

// ---------------------------------------------------------------------
// Tickets

fn cors(mut response: Response) -> Response {
    let h = response.headers_mut();
    h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
    h.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static("content-type, developer-id, user-id, timestamp, hash-key"),
    );
    h.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("POST, OPTIONS"),
    );
    h.insert(header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static("600"));
    response
}

/// The browser's preflight of a ticket request from a merchant's page.
async fn ticket_preflight() -> Response {
    cors(StatusCode::NO_CONTENT.into_response())
}

/// `POST /v2/tickets`: card or bank data typed on a page, kept for
/// [`tickets::LIFETIME_S`] to be stored in a vault with `ticket`.
/// Authenticated by hash-key (a page holds no API key), which it spends.
async fn create_ticket(
    State(app): State<AppState>,
    headers: HeaderMap,
    RawQuery(q): RawQuery,
    body: Bytes,
) -> Response {
    cors(match create_ticket_inner(&app, &headers, q, &body).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    })
}

async fn create_ticket_inner(
    app: &AppState,
    headers: &HeaderMap,
    q: Option<String>,
    body: &[u8],
) -> ApiResult<Response> {
    let pairs = query_pairs(q.as_deref());
    let creds = hash_credentials(headers, &pairs);
    let mut input = super::extract::envelope(body, "ticket")?;
    let method = match input.remove("payment_method") {
        Some(Json::String(m)) if m == "cc" || m == "ach" => m,
        _ => {
            return Err(ApiError::field(
                "payment_method",
                "Payment Method must be cc or ach.",
            ))
        }
    };
    let location = match input.remove("location_id") {
        None | Some(Json::Null) => None,
        Some(Json::String(l)) => Some(l),
        Some(_) => return Err(ApiError::field("location_id", "Location Id must be an id.")),
    };
    let (app2, keyring, clock) = (app.clone(), app.keyring.clone(), app.clock.clone());
    let ticket = app
        .store
        .write(move |conn| {
            let (caller, timestamp) = authenticate_hash_key(conn, &keyring, &creds, &clock)?;
            // A ticket is a vault made later by a form: both permissions.
            caller.perms.require("tickets.create")?;
            caller.perms.require("accountvaults.create")?;
            let cx = app2.cx(&caller);
            let location = resolve_location(conn, &cx, &caller, location)?;
            // Checked before the hash-key is spent: a mistyped number can
            // be corrected and sent again with the same link.
            tickets::check(&method, &input, cx.now).map_err(ApiError::Validation)?;
            sessions::open(
                conn,
                NewSession {
                    kind: Kind::Ticket,
                    hash_digest: Some(hash_key::digest(creds.hash_key.as_deref().unwrap_or_default())),
                    user_id: caller.user_id.clone(),
                    developer_id: caller.developer_id.clone(),
                    location_id: location.clone(),
                    page_id: None,
                    data: json!({ "payment_method": method }),
                    parent_origin: None,
                    now: cx.now,
                    expires_ts: timestamp + hash_key::HASH_LIFETIME_S,
                },
            )
            .and_then(|s| {
                sessions::finish(conn, &s.id, cx.now, &json!({}))?;
                Ok(s)
            })?;
            tickets::issue(
                conn,
                &keyring,
                &location,
                &caller.user_id,
                &method,
                &input,
                cx.now,
            )
        })
        .await?;
    Ok((StatusCode::CREATED, axum::Json(json!({ "ticket": ticket }))).into_response())
}

/// A ticket's location: the one named, if the caller may act there, or
/// the caller's own.
fn resolve_location(
    conn: &mut dyn Conn,
    cx: &Cx,
    caller: &Caller,
    named: Option<String>,
) -> ApiResult<String> {
    match named {
        None => Ok(caller.scope.location_id.clone()),
        Some(id) => query::find(conn, &crate::resources::LOCATION, &cx.scope, &id)?
            .map(|l| l.id().to_string())
            .ok_or_else(|| ApiError::field("location_id", "location_id provided is not valid")),
    }
}
