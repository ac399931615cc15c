//! The handlers every declared resource shares: thin wrappers that
//! authorise, parse, call the engine inside one store job and wrap the
//! answer in the envelope.

use super::extract::{envelope, query_pairs, IdPath, RawBody};
use super::AppState;
use crate::auth::Caller;
use crate::db::Conn;
use crate::engine::export::{self, Format};
use crate::engine::query::{self, ListQuery};
use crate::engine::record::Record;
use crate::engine::resource::Resource;
use crate::engine::{self, validate, Cx};
use crate::error::{ApiError, ApiResult, FieldErrors};
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, MethodRouter};
use axum::{Json, Router};
use serde_json::{Map, Value as JsonValue};

/// Which verbs a resource serves, and who serves them.
#[derive(Clone, Copy)]
pub struct Verbs {
    pub create: bool,
    pub update: bool,
    pub delete: bool,
    /// Served by the resource's own routes (which add actions), not the
    /// generic ones: the mount table still documents them.
    pub own_routes: bool,
}

pub const ALL: Verbs = Verbs {
    create: true,
    update: true,
    delete: true,
    own_routes: false,
};
pub const READ_ONLY: Verbs = Verbs {
    create: false,
    update: false,
    delete: false,
    own_routes: false,
};

impl Verbs {
    /// The same verbs, served by the resource's own routes.
    pub const fn own_routes(self) -> Verbs {
        Verbs {
            own_routes: true,
            ..self
        }
    }
}

pub fn routes(res: &'static Resource, verbs: Verbs) -> Router<AppState> {
    let mut collection: MethodRouter<AppState> =
        get(move |s: State<AppState>, c: Caller, q: RawQuery| list(res, s, c, q));
    if verbs.create {
        collection = collection.post(move |s: State<AppState>, c: Caller, b: RawBody| create(res, s, c, b));
    }
    let mut item: MethodRouter<AppState> =
        get(move |s: State<AppState>, c: Caller, p: IdPath, q: RawQuery| read(res, s, c, p, q));
    if verbs.update {
        item = item.put(
            move |s: State<AppState>, c: Caller, p: IdPath, q: RawQuery, b: RawBody| {
                update(res, s, c, p, q, b)
            },
        );
    }
    if verbs.delete {
        item =
            item.delete(move |s: State<AppState>, c: Caller, p: IdPath, q: RawQuery| delete(res, s, c, p, q));
    }
    Router::new()
        .route(&res.path(), collection)
        .route(&format!("{}/{{id}}", res.path()), item)
}

/// One record in its envelope.
pub fn one(res: &Resource, status: StatusCode, record: JsonValue) -> Response {
    let mut body = Map::new();
    body.insert(res.name.to_string(), record);
    (status, Json(JsonValue::Object(body))).into_response()
}

/// A page of records in the plural envelope with `meta`.
pub fn many(res: &Resource, records: Vec<JsonValue>, meta: JsonValue) -> Response {
    let mut body = Map::new();
    if let Some(alias) = res.api.list_alias {
        body.insert(alias.to_string(), JsonValue::Array(records.clone()));
    }
    body.insert(res.plural.to_string(), JsonValue::Array(records));
    body.insert("meta".into(), meta);
    Json(JsonValue::Object(body)).into_response()
}

/// How a single-record path names its record: by id, or with `?api_id=1`
/// by the resource's api id at a location (the caller's own by default).
pub enum Address {
    Id(String),
    ApiId { location_id: String, api_id: String },
}

pub fn address(
    res: &Resource,
    id: String,
    pairs: &[(String, String)],
    caller: &Caller,
) -> ApiResult<Address> {
    let mut by_api_id = false;
    for (k, v) in pairs.iter().filter(|(k, _)| k == "api_id") {
        match v.as_str() {
            "1" => by_api_id = true,
            "0" => {}
            _ => {
                return Err(ApiError::field(
                    validate::echo_name(k),
                    "Api Id must be 1 (the path holds the api id) or 0.",
                ))
            }
        }
    }
    if !by_api_id {
        return Ok(Address::Id(id));
    }
    if res.api_id.is_none() {
        return Err(ApiError::field(
            "api_id",
            format!("{} records have no api id.", res.name),
        ));
    }
    let location_id = pairs
        .iter()
        .find(|(k, _)| k == "location_id")
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| caller.scope.location_id.clone());
    Ok(Address::ApiId {
        location_id,
        api_id: id,
    })
}

/// Checks single-record query parameters: only expand, api_id, location_id
/// (with api_id) and credentials.
pub fn item_params(
    res: &'static Resource,
    pairs: &[(String, String)],
    allow_expand: bool,
) -> ApiResult<Vec<String>> {
    let mut errors = FieldErrors::new();
    let mut expand = Vec::new();
    for (k, v) in pairs {
        match k.as_str() {
            "expand" if allow_expand => {
                for name in v.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                    if res.expand(name).is_some() {
                        expand.push(name.to_string());
                    } else {
                        errors.add("expand", query::unknown_expand(res, name));
                    }
                }
            }
            "api_id" | "location_id" if res.api_id.is_some() => {}
            k if query::CREDENTIAL_PARAMS.contains(&k) => {}
            _ => {
                let k = validate::echo_name(k);
                errors.add(k.clone(), format!("Unknown parameter '{k}'."))
            }
        }
    }
    errors.into_result()?;
    Ok(expand)
}

pub fn locate(conn: &mut dyn Conn, cx: &Cx, res: &'static Resource, address: &Address) -> ApiResult<Record> {
    let found = match address {
        Address::Id(id) => query::find(conn, res, &cx.scope, id)?,
        Address::ApiId { location_id, api_id } => {
            query::find_by_api_id(conn, res, &cx.scope, location_id, api_id)?
        }
    };
    found.ok_or_else(|| ApiError::not_found(res.name))
}

async fn create(
    res: &'static Resource,
    State(app): State<AppState>,
    caller: Caller,
    RawBody(body): RawBody,
) -> ApiResult<Response> {
    caller.perms.require(&res.permission("create"))?;
    let input = envelope(&body, res.name)?;
    let input = validate::for_create(res, &input).map_err(ApiError::Validation)?;
    let cx = app.cx(&caller);
    let cx2 = cx.clone();
    let (record, created) = app
        .store
        .write(move |conn| engine::create(&cx2, conn, res, input))
        .await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok(one(res, status, JsonValue::Object(engine::render(&cx, &record))))
}

pub async fn read(
    res: &'static Resource,
    State(app): State<AppState>,
    caller: Caller,
    IdPath(id): IdPath,
    RawQuery(q): RawQuery,
) -> ApiResult<Response> {
    // A user reads their own record by its id as by `/v2/users/me`, with
    // any role and without the permission to read others (a resource
    // with fields a user may change on their own record has one).
    let own = id == caller.user_id && caller.perms.has_some() && !res.api.own_record_fields.is_empty();
    if !own {
        caller.perms.require(&res.permission("read"))?;
    }
    let pairs = query_pairs(q.as_deref());
    let expand = item_params(res, &pairs, true)?;
    let address = address(res, id, &pairs, &caller)?;
    let cx = app.cx(&caller);
    let body = app
        .store
        .read(move |conn| {
            let record = locate(conn, &cx, res, &address)?;
            engine::render_read(&cx, conn, &record, &[], &expand)
        })
        .await?;
    Ok(one(res, StatusCode::OK, body))
}

pub async fn list(
    res: &'static Resource,
    State(app): State<AppState>,
    caller: Caller,
    RawQuery(q): RawQuery,
) -> ApiResult<Response> {
    list_within(res, app, caller, q, None).await
}

/// The records of a list that belong to one parent record, served under
/// the parent's path (`/v2/postbackconfigs/{id}/deliveries`).
pub struct Within {
    pub parent: &'static Resource,
    pub parent_id: String,
    /// The listed resource's column naming the parent.
    pub column: &'static str,
    pub path: String,
}

/// A list, optionally of one parent's records: 404 when the parent is not
/// in the caller's scope.
pub async fn list_within(
    res: &'static Resource,
    app: AppState,
    caller: Caller,
    q: Option<String>,
    within: Option<Within>,
) -> ApiResult<Response> {
    caller.perms.require(&res.permission("read"))?;
    let mut pairs = query_pairs(q.as_deref());
    let format = match pairs.iter().position(|(k, _)| k == "_format") {
        None => None,
        Some(i) => {
            let (_, value) = pairs.remove(i);
            Some(
                Format::parse(&value)
                    .ok_or_else(|| ApiError::field("_format", "_format must be csv or tsv."))?,
            )
        }
    };
    let cx = app.cx(&caller);
    let q = ListQuery::parse(res, &pairs, &cx.scope, cx.now)?;
    res.rules.check_list_params(&q.extra)?;
    if let Some(format) = format {
        return export(res, app, cx, q, within, format).await;
    }
    let path = within.as_ref().map_or_else(|| res.path(), |w| w.path.clone());
    let cx2 = cx.clone();
    let q2 = q.clone();
    let (records, total) = app
        .store
        .read(move |conn| {
            if let Some(w) = &within {
                query::find(conn, w.parent, &cx2.scope, &w.parent_id)?
                    .ok_or_else(|| ApiError::not_found(w.parent.name))?;
            }
            let conditions = |sql: &mut crate::db::Sql| list_conditions(res, &cx2, &q2, within.as_ref(), sql);
            let (records, total) = query::list(conn, res, &cx2.scope, &q2, Some(&conditions))?;
            let mut out = Vec::with_capacity(records.len());
            for r in &records {
                out.push(engine::render_read(&cx2, conn, r, &q2.extra, &q2.expand)?);
            }
            Ok((out, total))
        })
        .await?;
    let meta = engine::list_meta(&cx, &path, &q, total);
    Ok(many(res, records, meta))
}

/// What a list adds to its filters: the resource's own conditions and,
/// under a parent's path, the parent.
fn list_conditions(
    res: &Resource,
    cx: &Cx,
    q: &ListQuery,
    within: Option<&Within>,
    sql: &mut crate::db::Sql,
) {
    res.rules.list_conditions(cx, &q.extra, sql);
    if let Some(w) = within {
        sql.push(" AND t.")
            .push(w.column)
            .push(" = ")
            .bind(w.parent_id.clone());
    }
}

/// The limits on the list exports of one node. An export holds a
/// database connection for as long as its client takes the file, so a
/// node runs at most a quarter of its pool's connections' worth of
/// exports at once (at least one), and drops an export whose client reads
/// nothing for `stall`: clients that do not read cannot keep connections
/// from payments and every other request (ADR 0013).
pub struct ExportLimits {
    slots: std::sync::Arc<tokio::sync::Semaphore>,
    most: usize,
    stall: std::time::Duration,
}

/// What a refused export is told to wait before it tries again, seconds.
const EXPORT_RETRY_AFTER_SECS: u64 = 5;

/// The size of the parts an export hands to its client.
const EXPORT_CHUNK_BYTES: usize = 64 * 1024;

impl ExportLimits {
    pub fn new(db_pool: usize, stall: std::time::Duration) -> ExportLimits {
        let most = (db_pool / 4).max(1);
        ExportLimits {
            slots: std::sync::Arc::new(tokio::sync::Semaphore::new(most)),
            most,
            stall,
        }
    }

    /// A place for one more export, held until the export ends; 503 with
    /// `Retry-After` when every place is taken.
    fn claim(&self) -> ApiResult<tokio::sync::OwnedSemaphorePermit> {
        self.slots
            .clone()
            .try_acquire_owned()
            .map_err(|_| ApiError::Busy {
                message: format!(
                    "This server is already running as many list exports as it runs at once ({}); \
                     retry in a few seconds.",
                    self.most
                ),
                retry_after: EXPORT_RETRY_AFTER_SECS,
            })
    }
}

/// A list as a file (`_format=csv|tsv`): every selected record, streamed
/// from one cursor as it is read, so a list of any length is never held
/// whole. A failure after the first bytes, a client gone or one that
/// stopped reading ends the body early.
async fn export(
    res: &'static Resource,
    app: AppState,
    cx: Cx,
    q: ListQuery,
    within: Option<Within>,
    format: Format,
) -> ApiResult<Response> {
    let slot = app.exports.claim()?;
    if let Some(w) = &within {
        let (parent, id, scope) = (w.parent, w.parent_id.clone(), cx.scope.clone());
        app.store
            .read(move |conn| {
                query::find(conn, parent, &scope, &id)?.ok_or_else(|| ApiError::not_found(parent.name))
            })
            .await?;
    }
    let (tx, rx) = tokio::sync::mpsc::channel::<bytes::Bytes>(4);
    let complete = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let body = ChannelBody {
        chunks: rx,
        complete: complete.clone(),
        ended: false,
    };
    let stall = app.exports.stall;
    let runtime = tokio::runtime::Handle::current();
    let job = move |conn: &mut dyn Conn| -> ApiResult<()> {
        // Hands a part to the client, waiting at most `stall` for room:
        // false when the client left or stopped reading, which stops the
        // read and gives the connection back.
        let send = |chunk: String| -> bool {
            let sent = runtime.block_on(tokio::time::timeout(stall, tx.send(bytes::Bytes::from(chunk))));
            match sent {
                Ok(sent) => sent.is_ok(),
                Err(_) => {
                    tracing::warn!(
                        resource = res.plural,
                        stall_ms = stall.as_millis() as u64,
                        "a list export's client read nothing for too long; the export was dropped"
                    );
                    false
                }
            }
        };
        let columns = export::columns(res);
        let mut buffer = export::header(res, format);
        let mut open = true;
        let conditions = |sql: &mut crate::db::Sql| list_conditions(res, &cx, &q, within.as_ref(), sql);
        query::each(conn, res, &cx.scope, &q, Some(&conditions), &mut |record| {
            buffer.push_str(&export::lines(&cx, &record, &columns, format));
            if buffer.len() >= EXPORT_CHUNK_BYTES {
                open = send(std::mem::take(&mut buffer));
            }
            open
        })?;
        if open && (buffer.is_empty() || send(buffer)) {
            complete.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        Ok(())
    };
    let store = app.store.clone();
    tokio::spawn(async move {
        // The place is given back when the read ends, however it ends.
        let _slot = slot;
        if let Err(e) = store.read(job).await {
            tracing::error!(error = %e, "a list export stopped early");
        }
    });
    let name = format!("attachment; filename=\"{}.{}\"", res.plural, format.extension());
    Ok((
        [
            (
                axum::http::header::CONTENT_TYPE,
                format.content_type().to_string(),
            ),
            (axum::http::header::CONTENT_DISPOSITION, name),
        ],
        axum::body::Body::new(body),
    )
        .into_response())
}

/// A response body fed by a channel. When the channel closes before the
/// export said it is complete, the body ends with an error, so the client
/// sees an incomplete transfer rather than a short file that looks whole.
struct ChannelBody {
    chunks: tokio::sync::mpsc::Receiver<bytes::Bytes>,
    complete: std::sync::Arc<std::sync::atomic::AtomicBool>,
    ended: bool,
}

impl http_body::Body for ChannelBody {
    type Data = bytes::Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<bytes::Bytes>, std::io::Error>>> {
        use std::task::Poll;
        if self.ended {
            return Poll::Ready(None);
        }
        match self.chunks.poll_recv(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Some(chunk)) => Poll::Ready(Some(Ok(http_body::Frame::data(chunk)))),
            Poll::Ready(None) => {
                self.ended = true;
                if self.complete.load(std::sync::atomic::Ordering::SeqCst) {
                    Poll::Ready(None)
                } else {
                    Poll::Ready(Some(Err(std::io::Error::other("the export stopped early"))))
                }
            }
        }
    }
}

pub async fn update(
    res: &'static Resource,
    State(app): State<AppState>,
    caller: Caller,
    IdPath(id): IdPath,
    RawQuery(q): RawQuery,
    RawBody(body): RawBody,
) -> ApiResult<Response> {
    let (address, input) = update_input(res, &caller, id, q.as_deref(), &body)?;
    save_update(res, &app, &caller, address, input).await
}

/// The checked input of a PUT and the record it names: the caller may
/// make the change, the parameters and the body are valid. Nothing is
/// read yet.
pub fn update_input(
    res: &'static Resource,
    caller: &Caller,
    id: String,
    query: Option<&str>,
    body: &[u8],
) -> ApiResult<(Address, validate::UpdateInput)> {
    let input = envelope(body, res.name)?;
    // A session opened with a one-time password may set that user's own
    // password, nothing else (the extractor lets only that PUT through).
    let must_change = caller.session.as_ref().is_some_and(|s| s.must_change_password);
    if must_change && !input.keys().all(|k| k == "password" || k == "old_password") {
        return Err(ApiError::Forbidden(
            "A new password is required: send only password and old_password until it is set.".into(),
        ));
    }
    // A user may change what the declaration allows on their own record
    // (their password) without the permission to update others.
    // (A user with no role has no permission at all, on its own record
    // neither.)
    let own = id == caller.user_id
        && caller.perms.has_some()
        && !res.api.own_record_fields.is_empty()
        && input
            .keys()
            .all(|k| res.api.own_record_fields.contains(&k.as_str()));
    if !own {
        caller.perms.require(&res.permission("update"))?;
    }
    let pairs = query_pairs(query);
    item_params(res, &pairs, false)?;
    let address = address(res, id, &pairs, caller)?;
    let input = validate::for_update(res, &input).map_err(ApiError::Validation)?;
    Ok((address, input))
}

/// Applies a checked update ([`update_input`]) in one write job and
/// answers the record.
pub async fn save_update(
    res: &'static Resource,
    app: &AppState,
    caller: &Caller,
    address: Address,
    input: validate::UpdateInput,
) -> ApiResult<Response> {
    let cx = app.cx(caller);
    let cx2 = cx.clone();
    let record = app
        .store
        .write(move |conn| {
            let old = locate(conn, &cx2, res, &address)?;
            engine::update_record(&cx2, conn, old, input)
        })
        .await?;
    Ok(one(
        res,
        StatusCode::OK,
        JsonValue::Object(engine::render(&cx, &record)),
    ))
}

pub async fn delete(
    res: &'static Resource,
    State(app): State<AppState>,
    caller: Caller,
    IdPath(id): IdPath,
    RawQuery(q): RawQuery,
) -> ApiResult<Response> {
    caller.perms.require(&res.permission("delete"))?;
    let pairs = query_pairs(q.as_deref());
    item_params(res, &pairs, false)?;
    let address = address(res, id, &pairs, &caller)?;
    let cx = app.cx(&caller);
    app.store
        .write(move |conn| {
            let record = locate(conn, &cx, res, &address)?;
            engine::delete_record(&cx, conn, &record)
        })
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
