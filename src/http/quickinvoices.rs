//! Quick invoices over HTTP: the actions beside the generic CRUD
//! (`addTransaction`, `removeTransaction`, `resend`) and the pay page a
//! customer reaches from the emailed link (`/quickinvoice/pay/{token}`),
//! rendered like the hosted forms and paying through the payments core.

use super::crud::one;
use super::extract::{envelope, IdPath, RawBody};
use super::hosted::{render_result_page, FormView, Framing};
use super::AppState;
use crate::auth::Caller;
use crate::db::{Conn, Sql};
use crate::engine::record::Record;
use crate::engine::{self, query, Cx};
use crate::error::{ApiError, ApiResult, FieldErrors};
use crate::files::{MAX_FILES_PER_INVOICE, MAX_FILE_BYTES};
use crate::hosted::form::{self, Flags, Kind, ProductDefaults};
use crate::invoices::attachments::{self, Checked, Upload};
use crate::invoices::{self, PAID_STATUSES};
use crate::money::Money;
use crate::payments::{actions, Idempotency, NewPayment, Origin, QuickInvoiceId, TrxSource};
use crate::resources::product_transactions::settings as product_settings;
use crate::resources::{PRODUCT_TRANSACTION, QUICK_INVOICE, TRANSACTION};
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Multipart};
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put};
use axum::Router;
use serde_json::{json, Map, Value as Json};

pub fn routes(state: AppState) -> Router<AppState> {
    // The generic routes, with multipart creates (files) taken first.
    let generic = super::crud::routes(&QUICK_INVOICE, super::crud::ALL)
        .layer(axum::middleware::from_fn_with_state(state, multipart_create));
    Router::new()
        .merge(generic)
        .route("/v2/quickinvoices/{id}/addTransaction", put(add_transaction))
        .route(
            "/v2/quickinvoices/{id}/removeTransaction",
            put(remove_transaction),
        )
        .route("/v2/quickinvoices/{id}/resend", post(resend))
        .route(
            "/v2/quickinvoices/{id}/files",
            post(add_files).layer(DefaultBodyLimit::max(UPLOAD_LIMIT)),
        )
        .route("/v2/quickinvoices/{id}/files/{file_id}", delete(remove_file))
        .route("/quickinvoice/pay/{token}", get(show).post(pay))
        .route("/quickinvoice/pay/{token}/files/{file_id}", get(download))
}

/// The largest request carrying files: four files of 5 MB and the form.
pub const UPLOAD_LIMIT: usize = MAX_FILES_PER_INVOICE * MAX_FILE_BYTES + 1024 * 1024;

/// The invoice as answered by the actions: with its `transactions` and
/// `files`.
fn answer(cx: &Cx, conn: &mut dyn Conn, record: &Record) -> ApiResult<Json> {
    let mut out = engine::render(cx, record);
    out.insert(
        "transactions".into(),
        crate::resources::quickinvoices::transactions(cx, conn, record.id())?,
    );
    let files = attachments::list(conn, record.id())?;
    out.insert(
        "files".into(),
        Json::Array(files.iter().map(|f| f.to_json()).collect()),
    );
    Ok(Json::Object(out))
}

// ---------------------------------------------------------------------
// Files

/// Around the generic routes of quick invoices: a multipart
/// `POST /v2/quickinvoices` (`quickinvoice[title]`,
/// `quickinvoice[item_list][name]`, `quickinvoice[tags][n]`,
/// `quickinvoice[files][n]`) creates the invoice and its files in one
/// write job; everything else goes on to the generic routes.
pub async fn multipart_create(
    State(app): State<AppState>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let multipart = request.method() == axum::http::Method::POST
        && request.uri().path() == "/v2/quickinvoices"
        && request
            .headers()
            .get(axum::http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.to_ascii_lowercase().starts_with("multipart/form-data"));
    if !multipart {
        return next.run(request).await;
    }
    // The upload limit holds for this request only.
    let handler = tower::service_fn(move |request: axum::extract::Request| {
        let app = app.clone();
        async move {
            Ok::<_, std::convert::Infallible>(match create_from_multipart(app, request).await {
                Ok(r) => r,
                Err(e) => e.into_response(),
            })
        }
    });
    let limited = tower::Layer::layer(&DefaultBodyLimit::max(UPLOAD_LIMIT), handler);
    match tower::ServiceExt::oneshot(limited, request).await {
        Ok(response) => response,
        Err(never) => match never {},
    }
}

/// `quickinvoice[a]` → `a`, `quickinvoice[a][b]` → `a.b`, `quickinvoice[a][0]` → `a[0]`.
fn form_key(name: &str) -> Option<Vec<String>> {
    let rest = name.strip_prefix("quickinvoice")?;
    let mut keys = Vec::new();
    let mut rest = rest;
    while let Some(inner) = rest.strip_prefix('[') {
        let end = inner.find(']')?;
        keys.push(inner[..end].to_string());
        rest = &inner[end + 1..];
    }
    (rest.is_empty() && !keys.is_empty()).then_some(keys)
}

/// The form fields as the JSON body of a create: nested keys become
/// objects, numbered ones (`tags[0]`) arrays.
fn form_body(fields: Vec<(String, String)>) -> ApiResult<Map<String, Json>> {
    let mut body = Map::new();
    for (name, value) in fields {
        let keys = form_key(&name).ok_or_else(|| {
            ApiError::field(
                crate::engine::validate::echo_name(&name),
                "Multipart fields are named quickinvoice[field] (or quickinvoice[field][key]).",
            )
        })?;
        match keys.as_slice() {
            [field] => {
                body.insert(field.clone(), Json::String(value));
            }
            [field, key] => {
                let entry = body.entry(field.clone()).or_insert_with(|| {
                    if key.bytes().all(|b| b.is_ascii_digit()) {
                        Json::Array(Vec::new())
                    } else {
                        Json::Object(Map::new())
                    }
                });
                match entry {
                    Json::Array(list) => list.push(Json::String(value)),
                    Json::Object(map) => {
                        map.insert(key.clone(), Json::String(value));
                    }
                    _ => {}
                }
            }
            _ => {
                return Err(ApiError::field(
                    crate::engine::validate::echo_name(&name),
                    "Multipart fields nest one level at most.",
                ))
            }
        }
    }
    Ok(body)
}

async fn create_from_multipart(app: AppState, request: axum::extract::Request) -> ApiResult<Response> {
    use axum::extract::{FromRequest, FromRequestParts};
    let (mut head, body) = request.into_parts();
    let caller = Caller::from_request_parts(&mut head, &app).await?;
    caller.perms.require("quickinvoices.create")?;
    let request = axum::extract::Request::from_parts(head, body);
    let multipart = Multipart::from_request(request, &app)
        .await
        .map_err(|e| ApiError::BadRequest(format!("The multipart body is not valid: {}", e.body_text())))?;
    let parts = read_parts(multipart).await?;
    let mut files = Vec::new();
    for upload in parts.files {
        match form_key(&upload.field).as_deref() {
            Some([field, _]) if field == "files" => files.push(upload),
            _ => {
                return Err(ApiError::field(
                    crate::engine::validate::echo_name(&upload.field),
                    "Files are sent as quickinvoice[files][n].",
                ))
            }
        }
    }
    let mut body = form_body(parts.fields)?;
    // The invoice is mailed once its files are recorded, so they go along.
    let send_email = match body.remove("send_email") {
        Some(v) => engine::validate::parse_flag(&v)
            .ok_or_else(|| ApiError::field("send_email", "Send Email must be either 1 or 0."))?,
        None => false,
    };
    let input = engine::validate::for_create(&QUICK_INVOICE, &body).map_err(ApiError::Validation)?;
    let checked = attachments::check(files, 0).map_err(ApiError::Validation)?;
    let keys = store_files(&app, &checked).await?;
    let cx = app.cx(&caller);
    let (cx2, keys2) = (cx.clone(), keys.clone());
    let created = app
        .store
        .write(move |conn| {
            let (record, _) = engine::create(&cx2, conn, &QUICK_INVOICE, input)?;
            if !checked.is_empty() {
                let location = record.text("location_id").unwrap_or_default().to_string();
                attachments::require_storage(conn, &location)?;
                for (file, key) in checked.iter().zip(&keys2) {
                    attachments::record(conn, record.id(), &location, &cx2.user_id, file, key, cx2.now)?;
                }
            }
            if send_email {
                invoices::send(conn, cx2.now, &cx2.public_url, &record)?;
            }
            answer(&cx2, conn, &record)
        })
        .await;
    match created {
        Ok(body) => Ok(one(&QUICK_INVOICE, StatusCode::CREATED, body)),
        Err(e) => {
            remove_stored(&app, keys).await;
            Err(e)
        }
    }
}

/// The parts of a multipart body: form fields, and files by part name.
pub struct Parts {
    pub fields: Vec<(String, String)>,
    pub files: Vec<Upload>,
}

/// Reads a multipart body, refusing a part over the file size limit as it
/// streams in.
pub async fn read_parts(mut multipart: Multipart) -> ApiResult<Parts> {
    let bad = |e: axum::extract::multipart::MultipartError| {
        ApiError::BadRequest(format!("The multipart body is not valid: {}", e.body_text()))
    };
    let mut parts = Parts {
        fields: Vec::new(),
        files: Vec::new(),
    };
    while let Some(mut part) = multipart.next_field().await.map_err(bad)? {
        let name = part.name().unwrap_or_default().to_string();
        match part.file_name().map(str::to_string) {
            Some(file_name) => {
                let mut bytes = Vec::new();
                while let Some(chunk) = part.chunk().await.map_err(bad)? {
                    if bytes.len() + chunk.len() > MAX_FILE_BYTES {
                        return Err(ApiError::field(
                            name,
                            format!("{} is larger than 5 MB.", crate::files::safe_name(&file_name)),
                        ));
                    }
                    bytes.extend_from_slice(&chunk);
                }
                parts.files.push(Upload {
                    field: name,
                    name: file_name,
                    bytes,
                });
            }
            None => {
                let text = part.text().await.map_err(bad)?;
                parts.fields.push((name, text));
            }
        }
    }
    Ok(parts)
}

/// Writes checked files to the store; answers their keys. On a failure
/// the ones written are removed.
pub async fn store_files(app: &AppState, files: &[Checked]) -> ApiResult<Vec<String>> {
    let mut keys = Vec::new();
    for f in files {
        let key = crate::files::new_key();
        let (store, k, bytes) = (app.files.clone(), key.clone(), f.bytes.clone());
        let written = tokio::task::spawn_blocking(move || store.put(&k, &bytes))
            .await
            .map_err(ApiError::internal)?;
        if let Err(e) = written {
            remove_stored(app, keys).await;
            return Err(ApiError::internal(e));
        }
        keys.push(key);
    }
    Ok(keys)
}

/// Removes stored bytes (after their rows are gone, or were never made).
pub async fn remove_stored(app: &AppState, keys: Vec<String>) {
    let store = app.files.clone();
    let _ = tokio::task::spawn_blocking(move || {
        for key in keys {
            if let Err(e) = store.delete(&key) {
                tracing::warn!(error = %e, "files: a stored file could not be removed");
            }
        }
    })
    .await;
}

/// Records stored files on an invoice in one write job, checking the
/// count again (a concurrent upload), and answers the invoice.
async fn attach_files(
    app: &AppState,
    cx: &Cx,
    invoice_id: String,
    files: Vec<Checked>,
    keys: Vec<String>,
) -> ApiResult<Json> {
    let cx2 = cx.clone();
    let written = app
        .store
        .write(move |conn| {
            let invoice = find_invoice(conn, &cx2, &invoice_id)?;
            invoices::lock(conn, invoice.id())?;
            let location = invoice.text("location_id").unwrap_or_default().to_string();
            attachments::require_storage(conn, &location)?;
            if attachments::count(conn, invoice.id())? + files.len() > MAX_FILES_PER_INVOICE {
                return Err(ApiError::field(
                    "files",
                    format!("An invoice holds at most {MAX_FILES_PER_INVOICE} files."),
                ));
            }
            for (file, key) in files.iter().zip(&keys) {
                attachments::record(conn, invoice.id(), &location, &cx2.user_id, file, key, cx2.now)?;
            }
            answer(&cx2, conn, &invoice)
        })
        .await;
    written
}

/// `POST /v2/quickinvoices/{id}/files`: multipart, part `file[file]`.
async fn add_files(
    State(app): State<AppState>,
    caller: Caller,
    IdPath(id): IdPath,
    request: axum::extract::Request,
) -> ApiResult<Response> {
    use axum::extract::FromRequest;
    caller.perms.require("quickinvoices.update")?;
    let cx = app.cx(&caller);
    let (cx2, id2) = (cx.clone(), id.clone());
    let already = app
        .store
        .read(move |conn| {
            let invoice = find_invoice(conn, &cx2, &id2)?;
            attachments::require_storage(conn, invoice.text("location_id").unwrap_or_default())?;
            attachments::count(conn, invoice.id())
        })
        .await?;
    let multipart = Multipart::from_request(request, &app).await.map_err(|e| {
        ApiError::BadRequest(format!(
            "Send the file as multipart/form-data, part file[file]: {}",
            e.body_text()
        ))
    })?;
    let parts = read_parts(multipart).await?;
    if parts.files.is_empty() {
        return Err(ApiError::field(
            "file[file]",
            "Send the file as the multipart part file[file].",
        ));
    }
    let checked = attachments::check(parts.files, already).map_err(ApiError::Validation)?;
    let keys = store_files(&app, &checked).await?;
    match attach_files(&app, &cx, id, checked, keys.clone()).await {
        Ok(body) => Ok(one(&QUICK_INVOICE, StatusCode::OK, body)),
        Err(e) => {
            remove_stored(&app, keys).await;
            Err(e)
        }
    }
}

/// `DELETE /v2/quickinvoices/{id}/files/{file_id}`: 204, or 404.
async fn remove_file(
    State(app): State<AppState>,
    caller: Caller,
    Path((id, file_id)): Path<(String, String)>,
) -> ApiResult<Response> {
    caller.perms.require("quickinvoices.update")?;
    let cx = app.cx(&caller);
    let key = app
        .store
        .write(move |conn| {
            let invoice = find_invoice(conn, &cx, &id)?;
            attachments::remove(conn, invoice.id(), &file_id)?.ok_or_else(|| ApiError::not_found("file"))
        })
        .await?;
    remove_stored(&app, vec![key]).await;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `GET /quickinvoice/pay/{token}/files/{file_id}`: a file of the invoice,
/// for the customer (the pay page lists them).
async fn download(
    State(app): State<AppState>,
    headers: HeaderMap,
    Path((token, file_id)): Path<(String, String)>,
) -> Response {
    let json = super::hosted::wants_json(&headers);
    let app2 = app.clone();
    let found = app
        .store
        .read(move |conn| {
            let opened = open(&app2, conn, &token, None)?;
            attachments::list(conn, opened.invoice.id())?
                .into_iter()
                .find(|f| f.id == file_id)
                .ok_or_else(|| ApiError::not_found("file"))
        })
        .await;
    let file = match found {
        Ok(f) => f,
        Err(e) => return super::hosted::refused_unframed(json, e),
    };
    let store = app.files.clone();
    let key = file.key.clone();
    let bytes = match tokio::task::spawn_blocking(move || store.get(&key)).await {
        Ok(Ok(b)) => b,
        _ => {
            return super::hosted::refused_unframed(
                json,
                ApiError::NotFound("The file is no longer available.".into()),
            )
        }
    };
    // An ASCII name for every client, the real one for those that read
    // RFC 6266's filename*.
    let ascii: String = file
        .name
        .chars()
        .map(|c| if c.is_ascii_graphic() || c == ' ' { c } else { '_' })
        .collect();
    let encoded: String = form_urlencoded::byte_serialize(file.name.as_bytes())
        .collect::<String>()
        .replace('+', "%20");
    let disposition = format!("attachment; filename=\"{ascii}\"; filename*=UTF-8''{encoded}");
    let mut response = (StatusCode::OK, bytes).into_response();
    let h = response.headers_mut();
    for (name, value) in [
        (axum::http::header::CONTENT_TYPE, file.content_type.as_str()),
        (axum::http::header::CONTENT_DISPOSITION, disposition.as_str()),
        (axum::http::header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (axum::http::header::CACHE_CONTROL, "no-store"),
    ] {
        if let Ok(v) = axum::http::HeaderValue::from_str(value) {
            h.insert(name, v);
        }
    }
    response
}

fn transaction_id(raw: &[u8]) -> ApiResult<String> {
    let body = envelope(raw, "quickinvoice")?;
    match body.get("transaction_id") {
        Some(Json::String(id)) if !id.trim().is_empty() => Ok(id.trim().to_string()),
        _ => Err(ApiError::field(
            "transaction_id",
            "Transaction Id cannot be blank.",
        )),
    }
}

fn find_invoice(conn: &mut dyn Conn, cx: &Cx, id: &str) -> ApiResult<Record> {
    query::find(conn, &QUICK_INVOICE, &cx.scope, id)?.ok_or_else(|| ApiError::not_found("quickinvoice"))
}

fn find_transaction(conn: &mut dyn Conn, cx: &Cx, id: &str) -> ApiResult<Record> {
    query::find(conn, &TRANSACTION, &cx.scope, id)?
        .ok_or_else(|| ApiError::field("transaction_id", "transaction_id provided is not valid"))
}

/// `PUT /v2/quickinvoices/{id}/addTransaction`: a payment collected
/// elsewhere counts towards the invoice.
async fn add_transaction(
    State(app): State<AppState>,
    caller: Caller,
    IdPath(id): IdPath,
    RawBody(raw): RawBody,
) -> ApiResult<Response> {
    caller.perms.require("quickinvoices.update")?;
    let tx_id = transaction_id(&raw)?;
    let cx = app.cx(&caller);
    let body = app
        .store
        .write(move |conn| {
            let invoice = find_invoice(conn, &cx, &id)?;
            // Read again under the payment's lock: a concurrent request
            // may have attached it meanwhile.
            let found = find_transaction(conn, &cx, &tx_id)?;
            invoices::lock_payment(conn, found.id())?;
            let tx = find_transaction(conn, &cx, found.id())?;
            let mut errors = FieldErrors::new();
            if tx.text("location_id") != invoice.text("location_id") {
                errors.add(
                    "transaction_id",
                    "The transaction is not at the invoice's location.",
                );
            }
            match tx.text("quick_invoice_id") {
                Some(other) if other == invoice.id() => {
                    errors.add("transaction_id", "The transaction already pays this invoice.")
                }
                Some(_) => errors.add("transaction_id", "The transaction already pays another invoice."),
                None => {}
            }
            let pays = tx.int("status_id").is_some_and(|s| PAID_STATUSES.contains(&s))
                && matches!(tx.int("type_id"), Some(20 | 50));
            if !pays {
                errors.add(
                    "transaction_id",
                    "Only an approved payment (a sale or an ACH debit) can pay an invoice.",
                );
            }
            errors.into_result()?;
            invoices::link_payment(&cx, conn, &tx, Some(invoice.id()))?;
            let updated = invoices::refresh_stored(conn, invoice.id(), cx.now)?.unwrap_or(invoice);
            answer(&cx, conn, &updated)
        })
        .await?;
    Ok(one(&QUICK_INVOICE, StatusCode::OK, body))
}

/// `PUT /v2/quickinvoices/{id}/removeTransaction`: a payment no longer
/// counts towards the invoice (the payment itself stays).
async fn remove_transaction(
    State(app): State<AppState>,
    caller: Caller,
    IdPath(id): IdPath,
    RawBody(raw): RawBody,
) -> ApiResult<Response> {
    caller.perms.require("quickinvoices.update")?;
    let tx_id = transaction_id(&raw)?;
    let cx = app.cx(&caller);
    let body = app
        .store
        .write(move |conn| {
            let invoice = find_invoice(conn, &cx, &id)?;
            let found = find_transaction(conn, &cx, &tx_id)?;
            invoices::lock_payment(conn, found.id())?;
            let tx = find_transaction(conn, &cx, found.id())?;
            if tx.text("quick_invoice_id") != Some(invoice.id()) {
                return Err(ApiError::field(
                    "transaction_id",
                    "The transaction does not pay this invoice.",
                ));
            }
            invoices::link_payment(&cx, conn, &tx, None)?;
            let updated = invoices::refresh_stored(conn, invoice.id(), cx.now)?.unwrap_or(invoice);
            answer(&cx, conn, &updated)
        })
        .await?;
    Ok(one(&QUICK_INVOICE, StatusCode::OK, body))
}

/// `POST /v2/quickinvoices/{id}/resend`: the invoice mailed again; 204.
async fn resend(State(app): State<AppState>, caller: Caller, IdPath(id): IdPath) -> ApiResult<Response> {
    caller.perms.require("quickinvoices.update")?;
    let cx = app.cx(&caller);
    app.store
        .write(move |conn| {
            let invoice = find_invoice(conn, &cx, &id)?;
            invoices::send(conn, cx.now, &cx.public_url, &invoice)
        })
        .await?;
    app.mailer.wake();
    Ok(StatusCode::NO_CONTENT.into_response())
}

// ---------------------------------------------------------------------
// The pay page

/// An invoice reached by its pay token, with the caller it pays as (the
/// user who created it) and the form for a payment method.
struct Opened {
    invoice: Record,
    cx: Cx,
    method: String,
    methods: Vec<&'static str>,
    flags: Flags,
    fields: Vec<form::Field>,
    product_transaction_id: String,
    files: Vec<attachments::Stored>,
    /// The surcharge a credit card pays, in basis points (0 for none).
    surcharge_bp: i64,
}

/// The payment method the payer chose (`?method=cc|ach`), if any.
fn method_of(pairs: &[(String, String)]) -> ApiResult<Option<String>> {
    match pairs.iter().find(|(k, _)| k == "method").map(|(_, v)| v.as_str()) {
        None => Ok(None),
        Some(m @ ("cc" | "ach")) => Ok(Some(m.to_string())),
        Some(_) => Err(ApiError::BadRequest("method must be cc or ach.".into())),
    }
}

fn open(app: &AppState, conn: &mut dyn Conn, token: &str, wanted: Option<&str>) -> ApiResult<Opened> {
    invoices::check_token(token)?;
    let gone = || ApiError::NotFound("This invoice link is not valid.".into());
    let row = conn
        .query_one(&Sql::with(
            "SELECT id, created_user_id FROM quick_invoices WHERE pay_token = ?",
            vec![token.into()],
        ))?
        .ok_or_else(gone)?;
    let id = row[0].as_str().unwrap_or_default().to_string();
    let user = row[1].as_str().map(str::to_string).ok_or_else(gone)?;
    // The page pays as the invoice's user (ADR 0017): one who may no
    // longer take payments (disabled, deleted, or without the permission)
    // cannot take this one either. The customer is told in their words,
    // nothing about users.
    let caller = invoices::link_payer(conn, &user)?.ok_or_else(|| {
        ApiError::Forbidden("This invoice can no longer be paid online. Please contact the merchant.".into())
    })?;
    let cx = app.cx(&caller);
    let invoice = query::find(conn, &QUICK_INVOICE, &cx.scope, &id)?.ok_or_else(gone)?;
    // The link expires with the invoice.
    let today = crate::clock::date_text(cx.now, cx.scope.tz);
    if invoices::expired(&invoice, &today) {
        return Err(ApiError::NotFound("This invoice link has expired.".into()));
    }
    let mut methods = Vec::new();
    for (field, method) in [
        ("cc_product_transaction_id", "cc"),
        ("ach_product_transaction_id", "ach"),
    ] {
        if invoice.text(field).is_some() {
            methods.push(method);
        }
    }
    let method = match wanted {
        Some(m) if methods.contains(&m) => m.to_string(),
        _ => methods.first().copied().unwrap_or("cc").to_string(),
    };
    let pt_field = if method == "ach" {
        "ach_product_transaction_id"
    } else {
        "cc_product_transaction_id"
    };
    let product_transaction_id = invoice.text(pt_field).unwrap_or_default().to_string();
    let pt = query::find(conn, &PRODUCT_TRANSACTION, &cx.scope, &product_transaction_id)?;
    let defaults = ProductDefaults::from_settings(&pt.map(|p| product_settings(&p)).unwrap_or(Json::Null));
    let flags =
        form::take_flags(Kind::PaymentPage, &mut Map::new(), &defaults).map_err(ApiError::Validation)?;
    let mut fields = form::fields(Kind::PaymentPage, &method, &flags, &Map::new());
    let remaining = Money::from_cents(invoice.int("remaining_balance").unwrap_or(0)).to_text();
    if let Some(amount) = fields.iter_mut().find(|f| f.name == "transaction_amount") {
        amount.value = Some(remaining);
        // One payment of the balance unless the invoice takes parts.
        amount.readonly =
            invoice.int("allow_partial_pay") != Some(1) && invoice.int("allow_overpayment") != Some(1);
        amount.label = "Amount to pay".into();
    }
    let files = attachments::list(conn, invoice.id())?;
    let surcharge_bp = if method == "cc" { defaults.surcharge_bp } else { 0 };
    Ok(Opened {
        surcharge_bp,
        files,
        invoice,
        cx,
        method,
        methods,
        flags,
        fields,
        product_transaction_id,
    })
}

fn view(
    opened: &Opened,
    token: &str,
    errors: &FieldErrors,
    posted: &[(String, String)],
    status: StatusCode,
) -> Response {
    let r = &opened.invoice;
    let today = crate::clock::date_text(opened.cx.now, opened.cx.scope.tz);
    let payable = r.int("status_id") == Some(invoices::STATUS_OPEN) && !invoices::expired(r, &today);
    let money = |name: &str| Money::from_cents(r.int(name).unwrap_or(0)).to_text();
    let mut summary = vec![
        ("Amount due", format!("${}", money("amount_due"))),
        ("Remaining balance", format!("${}", money("remaining_balance"))),
        ("Due date", r.text("due_date").unwrap_or_default().to_string()),
    ];
    if let Some(n) = r.text("invoice_number").filter(|n| !n.is_empty()) {
        summary.insert(0, ("Invoice number", n.to_string()));
    }
    let state = match (r.int("status_id"), r.int("payment_status_id")) {
        (Some(invoices::STATUS_CLOSED), Some(invoices::PAYMENT_PAID)) => {
            Some("This invoice is paid in full. Thank you.")
        }
        _ if !payable => Some("This invoice can no longer be paid online."),
        (_, Some(invoices::PAYMENT_PARTIAL)) => Some("Part of this invoice is paid."),
        _ => None,
    };
    let switch = opened
        .methods
        .iter()
        .filter(|m| **m != opened.method)
        .map(|m| {
            (
                format!("/quickinvoice/pay/{token}?method={m}"),
                if *m == "ach" {
                    "Pay from a bank account instead"
                } else {
                    "Pay by card instead"
                },
            )
        })
        .collect();
    let form_view = FormView {
        session_action: format!("/quickinvoice/pay/{token}?method={}", opened.method),
        heading: r.text("title").unwrap_or("Invoice").to_string(),
        fields: &opened.fields,
        flags: &opened.flags,
        method: &opened.method,
        submit_label: "Pay invoice".into(),
        parent_origin: String::new(),
    };
    // The card surcharge, said before the payer pays: exactly on a fixed
    // balance, by its rate on an amount the payer chooses.
    let balance = r.int("remaining_balance").unwrap_or(0);
    let fixed = opened
        .fields
        .iter()
        .any(|f| f.name == "transaction_amount" && f.readonly);
    let surcharge_note = if fixed {
        super::hosted::surcharge_note(opened.surcharge_bp, balance, 0)
    } else {
        super::hosted::typed_surcharge_note(opened.surcharge_bp, Some(balance))
    };
    super::hosted::render_invoice_page(
        &form_view,
        surcharge_note,
        errors,
        posted,
        status,
        InvoiceView {
            summary,
            items: invoices::item_lines(r),
            header: r
                .text("item_header")
                .filter(|s| !s.is_empty())
                .map(str::to_string),
            footer: r
                .text("item_footer")
                .filter(|s| !s.is_empty())
                .map(str::to_string),
            note: r.text("note").filter(|s| !s.is_empty()).map(str::to_string),
            state,
            payable,
            switch,
            files: opened
                .files
                .iter()
                .map(|f| {
                    (
                        format!("/quickinvoice/pay/{token}/files/{}", f.id),
                        f.name.clone(),
                        format!("{} KB", (f.size + 1023) / 1024),
                    )
                })
                .collect(),
        },
    )
}

/// What the pay page shows besides the form.
pub struct InvoiceView {
    pub summary: Vec<(&'static str, String)>,
    pub items: Vec<(String, String)>,
    pub header: Option<String>,
    pub footer: Option<String>,
    pub note: Option<String>,
    pub state: Option<&'static str>,
    pub payable: bool,
    pub switch: Vec<(String, &'static str)>,
    /// Download link, name and size of each file.
    pub files: Vec<(String, String, String)>,
}

/// `GET /quickinvoice/pay/{token}`.
async fn show(
    State(app): State<AppState>,
    headers: HeaderMap,
    Path(token): Path<String>,
    RawQuery(q): RawQuery,
) -> Response {
    let json = super::hosted::wants_json(&headers);
    let pairs = super::extract::query_pairs(q.as_deref());
    let wanted = match method_of(&pairs) {
        Ok(m) => m,
        Err(e) => return super::hosted::refused_unframed(json, e),
    };
    let app2 = app.clone();
    let token2 = token.clone();
    match app
        .store
        .read(move |conn| open(&app2, conn, &token2, wanted.as_deref()))
        .await
    {
        Ok(opened) => view(&opened, &token, &FieldErrors::new(), &[], StatusCode::OK),
        Err(e) => super::hosted::refused_unframed(json, e),
    }
}

/// A read-only amount is the balance the page showed. If the invoice
/// changed since, the payer sees the new balance and pays again: the
/// amount charged is never one they did not see.
fn stale_amount(opened: &Opened, posted: &[(String, String)]) -> Option<FieldErrors> {
    let field = opened
        .fields
        .iter()
        .find(|f| f.name == "transaction_amount" && f.readonly)?;
    let cents = |t: &str| crate::money::parse_text(t.trim(), i64::MAX / 100).ok();
    let now = field.value.as_deref().and_then(cents);
    let (_, shown) = posted.iter().find(|(k, _)| k == "transaction_amount")?;
    if cents(shown) == now {
        return None;
    }
    let mut errors = FieldErrors::new();
    errors.add(
        "transaction_amount",
        format!(
            "The balance of this invoice is now {}: check the amount and pay again.",
            field.value.as_deref().unwrap_or_default()
        ),
    );
    Some(errors)
}

/// `POST /quickinvoice/pay/{token}`: a payment through the core, with the
/// invoice's rules checked in the payment's own write job.
async fn pay(
    State(app): State<AppState>,
    headers: HeaderMap,
    Path(token): Path<String>,
    RawQuery(q): RawQuery,
    body: Bytes,
) -> Response {
    let json = super::hosted::wants_json(&headers);
    let pairs = super::extract::query_pairs(q.as_deref());
    let wanted = match method_of(&pairs) {
        Ok(m) => m,
        Err(e) => return super::hosted::refused_unframed(json, e),
    };
    let posted: Vec<(String, String)> = form_urlencoded::parse(&body)
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    let app2 = app.clone();
    let token2 = token.clone();
    let opened = match app
        .store
        .read(move |conn| open(&app2, conn, &token2, wanted.as_deref()))
        .await
    {
        Ok(o) => o,
        Err(e) => return super::hosted::refused_unframed(json, e),
    };
    let mut base = Map::new();
    base.insert("payment_method".into(), json!(opened.method));
    base.insert(
        "action".into(),
        json!(if opened.method == "ach" { "debit" } else { "sale" }),
    );
    if opened.method == "ach" {
        base.insert("ach_sec_code".into(), json!("WEB"));
    }
    base.insert("location_id".into(), json!(opened.invoice.text("location_id")));
    base.insert(
        "product_transaction_id".into(),
        json!(opened.product_transaction_id),
    );
    if let Some(contact) = opened.invoice.text("contact_id") {
        base.insert("contact_id".into(), json!(contact));
    }
    let checked = match stale_amount(&opened, &posted) {
        Some(errors) => Err(errors),
        None => form::merge_submission(&opened.fields, &opened.flags, &posted, base),
    };
    let merged = match checked {
        Ok(m) => m,
        Err(errors) => {
            return view(
                &opened,
                &token,
                &errors,
                &posted,
                StatusCode::UNPROCESSABLE_ENTITY,
            )
        }
    };
    let input = match actions::parse(&merged, false) {
        Ok(i) => i,
        Err(e) => return payment_refused(&opened, &token, e, &posted),
    };
    // The form's nonce makes a double submit one payment: the second
    // gets the first one's answer.
    let idempotency = posted
        .iter()
        .find(|(k, _)| k == "nonce")
        .map(|(_, n)| n.as_str())
        .filter(|n| n.len() == 32 && n.bytes().all(|b| b.is_ascii_alphanumeric()))
        .map(|n| Idempotency {
            key: format!("quickinvoice:{}:{n}", opened.invoice.id()),
            fingerprint: crate::payments::idempotency::fingerprint("POST", "/quickinvoice/pay", &body),
        });
    let request = NewPayment {
        input,
        origin: Origin {
            quick_invoice_id: Some(QuickInvoiceId::new(opened.invoice.id())),
            ..Origin::from(TrxSource::QuickInvoice)
        },
        idempotency,
    };
    match app.payments.create(opened.cx.clone(), request).await {
        Ok(reply) => {
            app.mailer.wake();
            // The pay page is opened from a mail, never by a script or
            // in a frame: no Close button, and no site may frame it.
            let flags = Flags {
                display_close_button: false,
                ..opened.flags.clone()
            };
            render_result_page(&reply.body, &flags, None, Framing::Never)
        }
        Err(e) => payment_refused(&opened, &token, e, &posted),
    }
}

fn payment_refused(opened: &Opened, token: &str, e: ApiError, posted: &[(String, String)]) -> Response {
    match e {
        // The same form sent again while its first submission still runs
        // (the nonce is the payment's idempotency key): said in the
        // payer's words.
        ApiError::Conflict(errors) if errors.has("idempotency_key") => {
            let mut errors = FieldErrors::new();
            errors.add(
                "form",
                "This payment is already being processed. Reload the page in a moment to see its result.",
            );
            view(opened, token, &errors, posted, StatusCode::CONFLICT)
        }
        // The same form sent again with a field changed (a double submit
        // after an edit, without script): its nonce, the idempotency key,
        // went with the first submission.
        ApiError::Validation(errors) if errors.has("idempotency_key") => {
            let mut errors = FieldErrors::new();
            errors.add(
                "form",
                "This form was already submitted. Reload the page to see what is still owed, then pay again.",
            );
            view(opened, token, &errors, posted, StatusCode::CONFLICT)
        }
        ApiError::Validation(errors) | ApiError::Conflict(errors) => {
            view(opened, token, &errors, posted, StatusCode::UNPROCESSABLE_ENTITY)
        }
        ApiError::Internal(_) => e.into_response(),
        other => {
            let mut errors = FieldErrors::new();
            errors.add(
                "form",
                other.body()["message"]
                    .as_str()
                    .unwrap_or("The payment could not be made.")
                    .to_string(),
            );
            view(opened, token, &errors, posted, other.status())
        }
    }
}
