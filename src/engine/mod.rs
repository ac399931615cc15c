//! The generic resource engine: what every declared resource shares.
//! Validation, scoped reads, create/update/delete with change logs,
//! rendering with `_links`, expands and list `meta`.

pub mod events;
pub mod export;
pub mod kept;
pub mod query;
pub mod record;
pub mod resource;
pub mod rules;
pub mod validate;

use crate::crypto::Keyring;
use crate::db::{Conn, DbError, Dialect, Sql, Value};
use crate::error::{ApiError, ApiResult, FieldErrors};
use events::{Action, Change, EventSink};
use query::{ListQuery, TenantScope};
use record::Record;
use resource::{Expand, Field, Kind, Resource, Scope};
use serde_json::{json, Map, Value as Json};
use std::sync::Arc;
use validate::{CreateInput, UpdateInput};

/// Everything an operation needs to know about who acts, where and when,
/// and where the events of its changes go.
#[derive(Clone)]
pub struct Cx {
    pub user_id: String,
    pub scope: TenantScope,
    pub now: i64,
    /// Where outbound requests may go (postback URLs are checked against it).
    pub outbound: crate::outbound::OutboundPolicy,
    pub keyring: Arc<Keyring>,
    pub public_url: Arc<str>,
    pub perms: Arc<crate::auth::Perms>,
    /// Told of every change, in its transaction (see [`events::record`]).
    pub sink: Arc<dyn EventSink>,
    /// The acting user's receipt address as read when the caller was
    /// authenticated (`Some(None)`: they want none), so that a payment
    /// does not read the user again; `None` for the system's own work.
    pub user_receipts: Option<Option<String>>,
    /// `auth_epoch` as read when the caller was authenticated: what this
    /// node keeps under it may serve this request (see [`kept`]). `None`
    /// for the system's own work and session callers: they read afresh.
    pub epoch: Option<i64>,
}

impl std::fmt::Debug for Cx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cx")
            .field("user_id", &self.user_id)
            .field("scope", &self.scope)
            .field("now", &self.now)
            .field("keyring", &self.keyring)
            .field("public_url", &self.public_url)
            .field("perms", &self.perms)
            .finish_non_exhaustive()
    }
}

impl Cx {
    pub fn href(&self, path: &str) -> String {
        format!("{}{}", self.public_url, path)
    }
}

/// The location a record belongs to.
pub fn location_of(record: &Record) -> Option<String> {
    match record.res.scope {
        Scope::Column(c) => record
            .fields()
            .find(|(f, _)| f.column == c)
            .and_then(|(_, v)| v.as_str().map(str::to_string)),
        Scope::Location => Some(record.id().to_string()),
    }
}

fn sealed_value(cx: &Cx, field: &Field, value: Value) -> Value {
    match (field.encrypted, value) {
        (true, Value::Text(plain)) => Value::Text(cx.keyring.encrypt(&plain)),
        (_, v) => v,
    }
}

fn clear_value(cx: &Cx, field: &Field, value: &Value) -> Value {
    match (field.encrypted, value) {
        (true, Value::Text(sealed)) => match cx.keyring.decrypt(sealed) {
            Ok(plain) => Value::Text(plain),
            Err(e) => {
                // Start-up checks the keys, so this is damage, not config.
                tracing::error!(field = field.name, error = %e, "a sealed value cannot be opened");
                Value::Null
            }
        },
        (_, v) => v.clone(),
    }
}

/// Checks that every id field naming another resource names a record the
/// caller can see.
/// Checks that each reference names a record the caller can see and, for
/// a record kept at a location (`at`), one kept at the same location: a
/// parent location's user sees its children's records, but a child's
/// invoice or vault must not name a sibling's contact, which that
/// location's own users could then read through it.
fn check_refs(
    cx: &Cx,
    conn: &mut dyn Conn,
    at: Option<&str>,
    fields: impl Iterator<Item = (&'static Field, Value)>,
) -> ApiResult<()> {
    let mut errors = FieldErrors::new();
    for (field, value) in fields {
        let (Some(target), Some(id)) = (field.refers, value.as_str()) else {
            continue;
        };
        match query::find(conn, target, &cx.scope, id)? {
            None => errors.add(field.name, format!("{} provided is not valid", field.name)),
            Some(found) => {
                let kept_at_a_location = matches!(target.scope, Scope::Column("location_id"));
                if let (true, Some(at)) = (kept_at_a_location && field.name != "location_id", at) {
                    if found.text("location_id").is_some_and(|l| l != at) {
                        errors.add(
                            field.name,
                            format!("{} belongs to another location.", validate::label(field.name)),
                        );
                    }
                }
            }
        }
    }
    errors.into_result()
}

/// The location a record is kept at, when its resource keeps records at
/// one.
fn kept_at(record: &Record) -> Option<&str> {
    matches!(record.res.scope, Scope::Column("location_id"))
        .then(|| record.text("location_id"))
        .flatten()
}

/// The reference check a create makes first, on its own: every id field
/// of `record` names a record the caller can see (for checks made before
/// a create, in the order the create would make them).
pub fn check_references(cx: &Cx, conn: &mut dyn Conn, record: &Record) -> ApiResult<()> {
    let refs: Vec<(&'static Field, Value)> = record
        .fields()
        .filter(|(f, v)| f.refers.is_some() && !v.is_null())
        .map(|(f, v)| (f, v.clone()))
        .collect();
    check_refs(cx, conn, kept_at(record), refs.into_iter())
}

/// Maps a unique-constraint failure (a race the rules' own check lost) to
/// a 422 on the resource's unique field; anything else stays a 500.
fn on_unique(res: &Resource, e: DbError) -> ApiError {
    match (e, res.unique) {
        (DbError::Unique(_), Some(column)) => ApiError::field(
            column,
            format!("{} has already been taken.", validate::label(column)),
        ),
        (e, _) => e.into(),
    }
}

/// Inserts a validated record. Returns the stored record and whether it
/// was created (false: the rules chose an existing record to update).
pub fn create(
    cx: &Cx,
    conn: &mut dyn Conn,
    res: &'static Resource,
    mut input: CreateInput,
) -> ApiResult<(Record, bool)> {
    check_references(cx, conn, &input.record)?;
    // System columns first, so the rules can use the new id.
    let id = crate::ids::new_id();
    for (i, field) in res.stored().enumerate() {
        match field.name {
            "id" => input.record.values[i] = Value::Text(id.clone()),
            "created_ts" | "modified_ts" => input.record.values[i] = Value::Int(cx.now),
            "created_user_id" | "modified_user_id" => {
                input.record.values[i] = Value::Text(cx.user_id.clone())
            }
            _ => {}
        }
    }
    if let Some(existing) = res.rules.before_create(cx, conn, &mut input)? {
        let changes = input
            .present
            .iter()
            .filter_map(|name| res.field(name))
            .filter(|f| f.put && f.stored)
            .map(|f| (f, input.record.get(f.name).clone()))
            .collect();
        let updated = update_record(cx, conn, existing, UpdateInput::of(changes))?;
        return Ok((updated, false));
    }
    // Required fields a create that could have updated did not check.
    let mut missing = crate::error::FieldErrors::new();
    for field in res.fields.iter().filter(|f| f.post && f.required && f.stored) {
        if input.record.get(field.name).is_null() {
            missing.add(field.name, validate::blank(field.name));
        }
    }
    missing.into_result()?;
    let mut record = input.record;
    for (i, field) in res.stored().enumerate() {
        let v = std::mem::replace(&mut record.values[i], Value::Null);
        record.values[i] = sealed_value(cx, field, v);
    }
    insert(conn, &record).map_err(|e| on_unique(res, e))?;
    res.rules.after_create(cx, conn, &record)?;
    events::record(conn, cx, Action::Create, &record, &[])?;
    Ok((record, true))
}

/// `INSERT INTO <table> (<stored columns>) VALUES (...)`
pub fn insert(conn: &mut dyn Conn, record: &Record) -> Result<u64, DbError> {
    conn.execute(&insert_sql(record))
}

/// The statement of [`insert`], for callers that append a conflict clause.
pub fn insert_sql(record: &Record) -> Sql {
    let res = record.res;
    let mut sql = Sql::new("INSERT INTO ");
    sql.push(res.table)
        .push(" (")
        .push(res.insert_columns())
        .push(") VALUES (");
    for (i, v) in record.values.iter().enumerate() {
        if i > 0 {
            sql.push(", ");
        }
        sql.bind(v.clone());
    }
    sql.push(")");
    sql
}

/// Applies an update to a record found in scope.
pub fn update(
    cx: &Cx,
    conn: &mut dyn Conn,
    res: &'static Resource,
    id: &str,
    input: UpdateInput,
) -> ApiResult<Record> {
    let old = query::find(conn, res, &cx.scope, id)?.ok_or_else(|| ApiError::not_found(res.name))?;
    update_record(cx, conn, old, input)
}

pub fn update_record(cx: &Cx, conn: &mut dyn Conn, old: Record, input: UpdateInput) -> ApiResult<Record> {
    let res = old.res;
    let mut changed = crate::error::FieldErrors::new();
    for (field, value) in &input.unchanged {
        if clear_value(cx, field, old.get(field.name)) != *value {
            changed.add(field.name, validate::cannot_change(field.name));
        }
    }
    changed.into_result()?;
    let changed_refs: Vec<(&'static Field, Value)> = input
        .changes
        .iter()
        .filter(|(f, v)| f.refers.is_some() && !v.is_null() && old.get(f.name) != v)
        .map(|(f, v)| (*f, v.clone()))
        .collect();
    check_refs(cx, conn, kept_at(&old), changed_refs.into_iter())?;
    let mut new = old.clone();
    for (field, value) in &input.changes {
        if clear_value(cx, field, old.get(field.name)) != *value {
            new.set(field.name, sealed_value(cx, field, value.clone()));
        }
    }
    res.rules.update_transient(cx, conn, &old, &mut new, &input)?;
    res.rules.before_update(cx, conn, &old, &mut new)?;
    let new = save_record(cx, conn, &old, new)?;
    if new.values != old.values {
        res.rules.after_update(cx, conn, &old, &new)?;
    }
    Ok(new)
}

/// Writes `new` over `old` as it is, without the resource's update rules:
/// for the system's own transitions (a schedule's run, a state change an
/// action made), with the change log row and event of any update.
pub fn save_record(cx: &Cx, conn: &mut dyn Conn, old: &Record, mut new: Record) -> ApiResult<Record> {
    let res = old.res;
    let changes: Vec<Change> = res
        .stored()
        .zip(old.values.iter().zip(new.values.iter()))
        .filter(|(_, (a, b))| a != b)
        .map(|(f, (a, b))| Change {
            field: f.name,
            old: if f.encrypted || f.digest {
                a.to_log_text().map(|_| "********".into())
            } else {
                a.to_log_text()
            },
            new: if f.encrypted || f.digest {
                b.to_log_text().map(|_| "********".into())
            } else {
                b.to_log_text()
            },
        })
        .collect();
    if changes.is_empty() {
        return Ok(new);
    }
    if res.stored_index("modified_ts").is_some() {
        new.set("modified_ts", cx.now);
    }
    if res.stored_index("modified_user_id").is_some() {
        new.set("modified_user_id", cx.user_id.clone());
    }
    let mut sql = Sql::new("UPDATE ");
    sql.push(res.table).push(" SET ");
    let mut first = true;
    for (field, (a, b)) in res.stored().zip(old.values.iter().zip(new.values.iter())) {
        if a == b {
            continue;
        }
        if !first {
            sql.push(", ");
        }
        first = false;
        sql.push(field.column).push(" = ").bind(b.clone());
    }
    sql.push(" WHERE id = ").bind(old.id().to_string());
    conn.execute(&sql).map_err(|e| on_unique(res, e))?;
    events::record(conn, cx, Action::Update, &new, &changes)?;
    Ok(new)
}

/// Deletes a record found in scope, if its rules allow.
pub fn delete(cx: &Cx, conn: &mut dyn Conn, res: &'static Resource, id: &str) -> ApiResult<()> {
    let record = query::find(conn, res, &cx.scope, id)?.ok_or_else(|| ApiError::not_found(res.name))?;
    delete_record(cx, conn, &record)
}

pub fn delete_record(cx: &Cx, conn: &mut dyn Conn, record: &Record) -> ApiResult<()> {
    let res = record.res;
    res.rules.before_delete(cx, conn, record)?;
    // Dependents live and die with their record; each leaves its own
    // change log entry and event.
    for cascade in res.cascades {
        delete_dependents(cx, conn, cascade.target, cascade.column, record.id())?;
    }
    let mut sql = Sql::new("DELETE FROM ");
    sql.push(res.table)
        .push(" WHERE id = ")
        .bind(record.id().to_string());
    match conn.execute(&sql) {
        Ok(_) => {}
        // A reference the rules did not foresee: refuse, never a 500, and
        // say what holds the record when that is known.
        Err(DbError::ForeignKey { table, .. }) => {
            let holders = match table {
                Some(table) => vec![table],
                None => referencing_tables(conn, res.table, record.id())?,
            };
            let mut message = format!("The {} is still used by other records", res.name);
            if !holders.is_empty() {
                let names: Vec<String> = holders.iter().map(|t| t.replace('_', " ")).collect();
                message.push_str(&format!(" ({})", names.join(", ")));
            }
            message.push('.');
            let mut errors = FieldErrors::new();
            errors.add("id", message);
            return Err(ApiError::Conflict(errors));
        }
        Err(other) => return Err(other.into()),
    }
    events::record(conn, cx, Action::Delete, record, &[])?;
    Ok(())
}

/// The tables with a row whose foreign key names `id` in `table`, read
/// from the schema, for an engine whose error does not name them (SQLite,
/// whose transaction stays usable after the refused statement; PostgreSQL
/// names the table itself). Only asked after a delete was refused.
fn referencing_tables(conn: &mut dyn Conn, table: &str, id: &str) -> ApiResult<Vec<String>> {
    if conn.dialect() != Dialect::Sqlite {
        return Ok(Vec::new());
    }
    let references = conn.query(&Sql::with(
        "SELECT m.name, k.\"from\" FROM sqlite_master m, pragma_foreign_key_list(m.name) k \
         WHERE m.type = 'table' AND k.\"table\" = ? ORDER BY m.name",
        vec![table.into()],
    ))?;
    let mut holders = Vec::new();
    for reference in references {
        let (Some(holder), Some(column)) = (reference[0].as_str(), reference[1].as_str()) else {
            continue;
        };
        // Names from the schema, quoted as identifiers; the id is bound.
        let mut sql = Sql::new(&format!(
            "SELECT 1 FROM \"{}\" WHERE \"{}\" = ",
            holder.replace('"', "\"\""),
            column.replace('"', "\"\"")
        ));
        sql.bind(id.to_string()).push(" LIMIT 1");
        if conn.query_one(&sql)?.is_some() && !holders.iter().any(|h| h == holder) {
            holders.push(holder.to_string());
        }
    }
    Ok(holders)
}

/// Deletes, one by one through `delete_record`, the records of `res` whose
/// `column` names `id`.
pub fn delete_dependents(
    cx: &Cx,
    conn: &mut dyn Conn,
    res: &'static Resource,
    column: &str,
    id: &str,
) -> ApiResult<()> {
    let mut sql = query::select(res, &cx.scope);
    sql.push(" AND t.").push(column).push(" = ").bind(id.to_string());
    for row in conn.query(&sql)? {
        delete_record(cx, conn, &Record::from_row(res, row))?;
    }
    Ok(())
}

/// The record as the API shows it: declared order, nulls kept, flags as
/// booleans, secrets decrypted, `_links.self.href` last.
pub fn render(cx: &Cx, record: &Record) -> Map<String, Json> {
    let mut out = Map::new();
    for (field, value) in record.fields() {
        if field.hidden {
            continue;
        }
        if field.masked {
            // Decrypted only to build the mask; the clear value never
            // leaves `mask_json`.
            out.insert(field.name.to_string(), mask_json(cx, field, value));
            continue;
        }
        let value = clear_value(cx, field, value);
        out.insert(field.name.to_string(), to_json(field, &value));
    }
    out.insert(
        "_links".into(),
        json!({ "self": { "href": cx.href(&format!("{}/{}", record.res.path(), record.id())) } }),
    );
    record.res.rules.render(cx, record, &mut out);
    out
}

/// A record as it is embedded in another (an expand) or sent in a
/// postback: [`render`], with the keys the reference gives such copies
/// (a contact's `header_message_type` is `header_message_type_id` there).
pub fn render_embedded(cx: &Cx, record: &Record) -> Map<String, Json> {
    let mut out = render(cx, record);
    embedded_keys(record.res, &mut out);
    out
}

/// Renames the members of a rendered `res` record that embedded copies
/// name differently (see [`render_embedded`]).
pub fn embedded_keys(res: &Resource, out: &mut Map<String, Json>) {
    if res.name == "contact" {
        if let Some(v) = out.remove("header_message_type") {
            out.insert("header_message_type_id".into(), v);
        }
    }
}

/// `XXXXXXXXXXXX1111` for a sealed number; null when absent. Values
/// shorter than eight characters are masked whole: four of them would
/// give away too much.
fn mask_json(cx: &Cx, field: &Field, value: &Value) -> Json {
    match clear_value(cx, field, value) {
        Value::Text(plain) => Json::String(mask_text(&plain)),
        _ => Json::Null,
    }
}

/// All but the last four characters as `X`; values shorter than eight
/// characters are masked whole.
pub fn mask_text(plain: &str) -> String {
    let n = plain.chars().count();
    let keep = if n >= 8 { 4 } else { 0 };
    let tail: String = plain.chars().skip(n - keep).collect();
    "X".repeat(n - keep) + &tail
}

pub fn to_json(field: &Field, value: &Value) -> Json {
    match (field.kind, value) {
        (Kind::Date, Value::Null) if field.zero_date => Json::String("0000-00-00".into()),
        (Kind::Tags, Value::Null) => json!([]),
        (Kind::Tags, Value::Text(s)) => {
            let titles: Vec<String> = serde_json::from_str(s).unwrap_or_default();
            Json::Array(
                titles
                    .into_iter()
                    .map(|t| json!({ "id": t, "title": t }))
                    .collect(),
            )
        }
        (_, Value::Null) => Json::Null,
        (Kind::Flag, Value::Int(i)) if field.numbered => json!(i64::from(*i != 0)),
        (Kind::Flag, Value::Int(i)) => Json::Bool(*i != 0),
        (Kind::Money { .. }, Value::Int(i)) => Json::String(crate::money::format(*i)),
        (Kind::Json { .. }, Value::Text(s)) => serde_json::from_str(s).unwrap_or(Json::Null),
        (_, Value::Int(i)) => json!(i),
        (_, Value::Text(s)) => Json::String(s.clone()),
    }
}

/// A record as a read answers it: the resource's own rendering when its
/// rules have one, else [`render_expanded`]. `extra`: the list's own
/// parameters (empty for a single read).
pub fn render_read(
    cx: &Cx,
    conn: &mut dyn Conn,
    record: &Record,
    extra: &[(String, String)],
    expand: &[String],
) -> ApiResult<Json> {
    match record.res.rules.render_read(cx, conn, record, extra, expand)? {
        Some(json) => Ok(json),
        None => render_expanded(cx, conn, record, expand),
    }
}

/// Renders a record with the requested expands embedded.
pub fn render_expanded(cx: &Cx, conn: &mut dyn Conn, record: &Record, expand: &[String]) -> ApiResult<Json> {
    let mut out = render(cx, record);
    for name in expand {
        let Some(spec) = record.res.expand(name) else {
            continue;
        };
        // Records the caller may not read are withheld as records out of
        // scope are: null, or [] for a list (the request still succeeds).
        if let Some((permission, many)) = spec.reads() {
            if !cx.perms.allows(&permission) {
                out.insert(name.clone(), if many { json!([]) } else { Json::Null });
                continue;
            }
        }
        let value = match spec {
            Expand::BelongsTo { target, column, .. } => {
                match record
                    .fields()
                    .find(|(f, _)| f.column == *column)
                    .and_then(|(_, v)| v.as_str())
                {
                    Some(id) => match query::find(conn, target, &cx.scope, id)? {
                        Some(r) => Json::Object(render_embedded(cx, &r)),
                        None => Json::Null,
                    },
                    None => Json::Null,
                }
            }
            Expand::HasMany { target, column, .. } => {
                let mut sql = query::select(target, &cx.scope);
                sql.push(" AND t.")
                    .push(column)
                    .push(" = ")
                    .bind(record.id().to_string());
                sql.push(" ORDER BY t.id ASC LIMIT 500");
                let rows = conn.query(&sql)?;
                Json::Array(
                    rows.into_iter()
                        .map(|r| Json::Object(render_embedded(cx, &Record::from_row(target, r))))
                        .collect(),
                )
            }
            Expand::Changelogs { users } => changelogs(cx, conn, record, users)?,
            Expand::Custom(name) | Expand::CustomRecords { name, .. } => {
                record.res.rules.expand(cx, conn, record, name)?
            }
        };
        out.insert(name.clone(), value);
    }
    Ok(Json::Object(out))
}

/// The change log of a record in the spec's shape, each entry with the
/// `users` record of who made it (null when the caller may not read or
/// see it), newest first (as the reference's batch
/// postback shows it; the spec gives no order). Details of hidden fields
/// (logged before they were left out) are not shown.
pub fn changelogs(
    cx: &Cx,
    conn: &mut dyn Conn,
    record: &Record,
    users: &'static Resource,
) -> ApiResult<Json> {
    let logs = conn.query(&Sql::with(
        "SELECT id, created_ts, action, model, model_id, user_id FROM changelogs WHERE model_id = ? ORDER BY id DESC LIMIT 500",
        vec![record.id().into()],
    ))?;
    let may_read_users = cx.perms.allows(&users.permission("read"));
    let mut out = Vec::with_capacity(logs.len());
    for log in logs {
        let id = log[0].as_str().unwrap_or_default().to_string();
        let details = conn.query(&Sql::with(
            "SELECT id, changelog_id, field, old_value FROM changelog_details WHERE changelog_id = ? ORDER BY id ASC",
            vec![id.clone().into()],
        ))?;
        let details: Vec<Json> = details
            .into_iter()
            .filter(|d| {
                !d[2]
                    .as_str()
                    .and_then(|field| record.res.field(field))
                    .is_some_and(|f| f.hidden)
            })
            .map(|d| json!({ "id": value_json(&d[0]), "changelog_id": value_json(&d[1]), "field": value_json(&d[2]), "old_value": value_json(&d[3]) }))
            .collect();
        // Only users the caller may see and read are embedded.
        let user = match log[5].as_str() {
            Some(_) if !may_read_users => Json::Null,
            Some(uid) => match query::find(conn, users, &cx.scope, uid)? {
                Some(u) => json!({
                    "id": value_json(u.get("id")),
                    "username": value_json(u.get("username")),
                    "first_name": value_json(u.get("first_name")),
                    "last_name": value_json(u.get("last_name")),
                    "email": value_json(u.get("email")),
                }),
                None => Json::Null,
            },
            None => Json::Null,
        };
        out.push(json!({
            "id": id,
            "created_ts": value_json(&log[1]),
            "action": value_json(&log[2]),
            "model": value_json(&log[3]),
            "model_id": value_json(&log[4]),
            "user_id": value_json(&log[5]),
            "changelog_details": details,
            "user": user,
        }));
    }
    Ok(Json::Array(out))
}

fn value_json(v: &Value) -> Json {
    match v {
        Value::Null => Json::Null,
        Value::Int(i) => json!(i),
        Value::Text(s) => Json::String(s.clone()),
    }
}

/// `meta` of a list: pagination with absolute links, and the sort used.
/// `currentPage` is zero-based, as in the reference's samples.
pub fn list_meta(cx: &Cx, path: &str, q: &ListQuery, total: u64) -> Json {
    json!({
        "pagination": pagination(&cx.public_url, path, &q.raw, q.page, q.page_size, total),
        "sort": { "attributes": { q.sort.name: if q.descending { "desc" } else { "asc" } } },
    })
}

/// `meta.pagination` of page `page` (from 1) of `per_page` records out of
/// `total` at `path`: links (absolute, under `public_url`) repeat the
/// request's parameters `raw` (but credentials) with another `page`.
pub fn pagination(
    public_url: &str,
    path: &str,
    raw: &[(String, String)],
    page: u64,
    per_page: u64,
    total: u64,
) -> Json {
    let page_count = total.div_ceil(per_page);
    let link = |page: u64| {
        let mut ser = form_urlencoded::Serializer::new(String::new());
        for (k, v) in raw {
            if k != "page" && !query::CREDENTIAL_PARAMS.contains(&k.as_str()) {
                ser.append_pair(k, v);
            }
        }
        ser.append_pair("page", &page.to_string());
        json!({ "href": format!("{public_url}{path}?{}", ser.finish()) })
    };
    let mut links = Map::new();
    links.insert("self".into(), link(page));
    if page < page_count {
        links.insert("next".into(), link(page + 1));
        links.insert("last".into(), link(page_count));
    }
    json!({
        "links": links,
        "totalCount": total,
        "pageCount": page_count,
        "currentPage": page - 1,
        "perPage": per_page,
    })
}
