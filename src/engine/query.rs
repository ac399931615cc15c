//! SQL for declared resources: the tenant scope (added to every query, no
//! way around it), lookups, filters, sort and pagination.

use super::record::Record;
use super::resource::{Field, Kind, Resource, Scope};
use super::validate::parse_flag;
use crate::db::{Conn, DbError, Dialect, Sql, Value};
use crate::error::{ApiResult, FieldErrors};
use chrono::{Datelike, Duration, NaiveDate, TimeZone};
use chrono_tz::Tz;

/// What a caller may see: its location and every location below it.
#[derive(Clone, Debug)]
pub struct TenantScope {
    /// The caller's own location.
    pub location_id: String,
    /// Materialised path of that location, `/root/.../self/`.
    pub path: String,
    /// Time zone in which `_ts` keywords are evaluated.
    pub tz: Tz,
    /// The location has no children: the scope is that one location, and
    /// queries can use a plain equality (the common case of a merchant).
    pub leaf: bool,
}

impl TenantScope {
    /// The scope of a location from its stored columns: its path, its
    /// `tz` (UTC when unset or unknown) and whether it has children (an
    /// integer flag, as `EXISTS` answers it).
    pub fn of_location(location_id: String, path: &Value, tz: &Value, has_children: &Value) -> TenantScope {
        TenantScope {
            location_id,
            path: path.as_str().unwrap_or_default().to_string(),
            tz: tz.as_str().and_then(|t| t.parse().ok()).unwrap_or(chrono_tz::UTC),
            leaf: has_children.as_int() == Some(0),
        }
    }

    /// `[lower, upper)` bounds of the paths inside this scope: every path
    /// that starts with ours. '0' is the character after '/'.
    pub fn bounds(&self) -> (String, String) {
        let mut upper = self.path.clone();
        upper.pop();
        upper.push('0');
        (self.path.clone(), upper)
    }
}

/// The scope of a location's own users: it and every location below it,
/// in its time zone. `None` when there is no such location.
pub fn location_scope(conn: &mut dyn Conn, location_id: &str) -> Result<Option<TenantScope>, DbError> {
    let row = conn.query_one(&Sql::with(
        "SELECT l.path, l.tz, EXISTS (SELECT 1 FROM locations c WHERE c.parent_id = l.id) \
         FROM locations l WHERE l.id = ?",
        vec![location_id.into()],
    ))?;
    Ok(row.map(|row| TenantScope::of_location(location_id.to_string(), &row[0], &row[1], &row[2])))
}

/// `SELECT <stored columns> FROM <table> t [JOIN locations s] WHERE <scope>`
pub fn select(res: &'static Resource, scope: &TenantScope) -> Sql {
    select_with(res, scope, false)
}

/// [`select`], for a query whose rows a search index finds when
/// `searching` (see [`from_scoped_with`]).
fn select_with(res: &'static Resource, scope: &TenantScope, searching: bool) -> Sql {
    let mut sql = Sql::new("SELECT ");
    sql.push(res.select_columns());
    from_scoped_with(res, scope, &mut sql, searching);
    sql
}

fn from_scoped(res: &Resource, scope: &TenantScope, sql: &mut Sql) {
    from_scoped_with(res, scope, sql, false);
}

/// `from_scoped`; with `searching`, a query whose rows a search index
/// finds (see `searchable`): the leaf scope's location index is then kept
/// out of the plan (SQLite's unary `+`), so that SQLite starts from the
/// few rows the index found instead of every row of the location.
fn from_scoped_with(res: &Resource, scope: &TenantScope, sql: &mut Sql, searching: bool) {
    let (lower, upper) = scope.bounds();
    sql.push(" FROM ").push(res.reads_from()).push(" t");
    if scope.leaf {
        let column = match res.scope {
            Scope::Column(column) => column,
            Scope::Location => "id",
        };
        sql.push(if searching { " WHERE +t." } else { " WHERE t." })
            .push(column)
            .push(" = ")
            .bind(scope.location_id.clone());
        return;
    }
    match res.scope {
        Scope::Column(column) => {
            sql.push(" JOIN locations s ON s.id = t.")
                .push(column)
                .push(" WHERE s.path >= ")
                .bind(lower)
                .push(" AND s.path < ")
                .bind(upper);
        }
        Scope::Location => {
            sql.push(" WHERE t.path >= ")
                .bind(lower)
                .push(" AND t.path < ")
                .bind(upper);
        }
    }
}

/// `SELECT <stored columns> FROM <table> t WHERE 1 = 1`, outside any
/// tenant scope: for the system's own jobs (completing a payment it
/// started, reconciling after a crash), never for a caller's request.
pub fn select_unscoped(res: &'static Resource) -> Sql {
    let mut sql = Sql::new("SELECT ");
    sql.push(res.select_columns())
        .push(" FROM ")
        .push(res.reads_from())
        .push(" t WHERE 1 = 1");
    sql
}

/// The record with this id, outside any tenant scope (system jobs only,
/// like [`select_unscoped`]).
pub fn find_unscoped(
    conn: &mut dyn Conn,
    res: &'static Resource,
    id: &str,
) -> Result<Option<Record>, DbError> {
    let mut sql = select_unscoped(res);
    sql.push(" AND t.id = ").bind(id.to_string());
    Ok(conn.query_one(&sql)?.map(|row| Record::from_row(res, row)))
}

/// The record with this id, if it exists inside the scope.
pub fn find(
    conn: &mut dyn Conn,
    res: &'static Resource,
    scope: &TenantScope,
    id: &str,
) -> Result<Option<Record>, DbError> {
    if !crate::ids::looks_like_id(id) {
        return Ok(None);
    }
    let mut sql = select(res, scope);
    sql.push(" AND t.id = ").bind(id);
    Ok(conn.query_one(&sql)?.map(|row| Record::from_row(res, row)))
}

/// Some columns (`t.a, t.b`) of the record with this id, if it exists
/// inside the scope: for a check that needs no whole record.
pub fn find_columns(
    conn: &mut dyn Conn,
    res: &'static Resource,
    scope: &TenantScope,
    id: &str,
    columns: &str,
) -> Result<Option<crate::db::Row>, DbError> {
    if !crate::ids::looks_like_id(id) {
        return Ok(None);
    }
    let mut sql = Sql::new("SELECT ");
    sql.push(columns);
    from_scoped(res, scope, &mut sql);
    sql.push(" AND t.id = ").bind(id);
    conn.query_one(&sql)
}

/// `SELECT <columns> FROM <table> t ... WHERE <scope>`: some columns
/// (`t.a, t.b`) of the records inside the scope, for a caller that adds
/// its own conditions (`AND ...`) and order and needs no whole records.
pub fn select_columns(res: &'static Resource, scope: &TenantScope, columns: &str) -> Sql {
    let mut sql = Sql::new("SELECT ");
    sql.push(columns);
    from_scoped(res, scope, &mut sql);
    sql
}

/// The record whose api id column holds `api_id` at `location_id`.
pub fn find_by_api_id(
    conn: &mut dyn Conn,
    res: &'static Resource,
    scope: &TenantScope,
    location_id: &str,
    api_id: &str,
) -> Result<Option<Record>, DbError> {
    let (Some(column), Scope::Column(loc_column)) = (res.api_id, res.scope) else {
        return Ok(None);
    };
    // Nothing stored can match: api ids are short and never hold NUL.
    if api_id.len() > 64 || api_id.contains('\0') || !crate::ids::looks_like_id(location_id) {
        return Ok(None);
    }
    let mut sql = select(res, scope);
    sql.push(" AND t.")
        .push(loc_column)
        .push(" = ")
        .bind(location_id)
        .push(" AND t.")
        .push(column)
        .push(" = ")
        .bind(api_id);
    Ok(conn.query_one(&sql)?.map(|row| Record::from_row(res, row)))
}

#[derive(Clone, Debug)]
enum Condition {
    In(&'static str, Vec<Value>),
    Like(&'static str, Vec<String>),
    Range(&'static str, Option<Value>, Option<Value>),
}

/// A parsed list request.
#[derive(Clone, Debug)]
pub struct ListQuery {
    pub page: u64,
    pub page_size: u64,
    pub sort: &'static Field,
    pub descending: bool,
    pub expand: Vec<String>,
    conditions: Vec<Condition>,
    /// Resource-specific parameters (see `Resource::list_params`).
    pub extra: Vec<(String, String)>,
    /// The raw pairs, to rebuild pagination links.
    pub raw: Vec<(String, String)>,
}

pub const MAX_PAGE_SIZE: u64 = 100;
/// Longest accepted list parameter value.
pub const MAX_PARAM_BYTES: usize = 1024;
/// Filter values one request may give, over all its filters (repeated
/// parameters and comma lists): a bound on the statement, the same on
/// both engines (SQLite refuses very deep expressions).
pub const MAX_FILTER_VALUES: usize = 200;
/// Most values one comma-list filter may carry.
pub const MAX_LIST_VALUES: usize = 100;

/// Credentials that may come as query parameters: never filters, never
/// repeated in pagination links.
pub const CREDENTIAL_PARAMS: &[&str] = &["developer-id", "user-id", "user-api-key", "access-token"];

impl ListQuery {
    pub fn parse(
        res: &'static Resource,
        pairs: &[(String, String)],
        scope: &TenantScope,
        now: i64,
    ) -> ApiResult<ListQuery> {
        let mut errors = FieldErrors::new();
        let mut q = ListQuery {
            page: 1,
            page_size: res.page_size,
            sort: res.field(res.default_sort.0).expect("default sort is declared"),
            descending: res.default_sort.1,
            expand: Vec::new(),
            conditions: Vec::new(),
            extra: Vec::new(),
            raw: pairs.to_vec(),
        };
        let mut filter_values = 0usize;
        for (key, value) in pairs {
            let key = key.as_str();
            if key.contains('\0') || value.contains('\0') {
                errors.add(
                    crate::engine::validate::echo_name(key),
                    "Parameters must not contain NUL characters.",
                );
                continue;
            }
            if value.len() > MAX_PARAM_BYTES {
                errors.add(
                    crate::engine::validate::echo_name(key),
                    format!("Parameter values are limited to {MAX_PARAM_BYTES} bytes."),
                );
                continue;
            }
            match key {
                "page" => match value.parse::<u64>() {
                    Ok(n) if n >= 1 => q.page = n,
                    _ => errors.add("page", "Page must be an integer of at least 1."),
                },
                "page_size" => match value.parse::<u64>() {
                    Ok(n) if (1..=MAX_PAGE_SIZE).contains(&n) => q.page_size = n,
                    _ => errors.add(
                        "page_size",
                        format!("Page Size must be an integer from 1 to {MAX_PAGE_SIZE}."),
                    ),
                },
                "sort" => {
                    let (name, desc) = match value.strip_prefix('-') {
                        Some(n) => (n, true),
                        None => (value.as_str(), false),
                    };
                    // The spec names the default sort of contacts "created".
                    let name = if name == "created" { "created_ts" } else { name };
                    match res.field(name).filter(|f| f.sort) {
                        Some(f) => {
                            q.sort = f;
                            q.descending = desc;
                        }
                        None => errors.add(
                            "sort",
                            format!(
                                "Cannot sort by '{}'. Sortable fields: {}.",
                                crate::engine::validate::echo_name(name),
                                sortable(res).join(", ")
                            ),
                        ),
                    }
                }
                "expand" => {
                    for name in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                        if res.expand(name).is_some() {
                            if !q.expand.iter().any(|e| e == name) {
                                q.expand.push(name.to_string());
                            }
                        } else {
                            errors.add("expand", unknown_expand(res, name));
                        }
                    }
                }
                "api_id" => {}
                _ if CREDENTIAL_PARAMS.contains(&key) => {}
                _ if res.list_params.contains(&key) => q.extra.push((key.to_string(), value.clone())),
                _ => {
                    if let Some(f) = filterable(res, key) {
                        if value.is_empty() {
                            continue;
                        }
                        let before = filter_values;
                        filter_values += value.split(',').count();
                        if filter_values > MAX_FILTER_VALUES {
                            if before <= MAX_FILTER_VALUES {
                                errors.add(
                                    "filter",
                                    format!("A request may give at most {MAX_FILTER_VALUES} filter values in all."),
                                );
                            }
                            continue;
                        }
                        if value.split(',').count() > MAX_LIST_VALUES {
                            errors.add(key, format!("At most {MAX_LIST_VALUES} comma-separated values."));
                            continue;
                        }
                        match condition(f, value, pairs, scope, now) {
                            Ok(Some(c)) => q.conditions.push(c),
                            Ok(None) => {}
                            Err(msg) => errors.add(key, msg),
                        }
                    } else if let Some(base) = key.strip_suffix("_from").or_else(|| key.strip_suffix("_to")) {
                        match filterable(res, base) {
                            Some(f) if f.kind == Kind::Ts => match value.parse::<i64>() {
                                Err(_) => errors.add(key, "Must be epoch seconds."),
                                // Alone (without `<field>=custom`) it is a
                                // range of its own; with it, `custom` reads it.
                                Ok(ts) if !pairs.iter().any(|(k, _)| k == base) => {
                                    let (low, high) = if key.ends_with("_from") {
                                        (Some(Value::Int(ts)), None)
                                    } else {
                                        (None, Some(Value::Int(ts)))
                                    };
                                    q.conditions.push(Condition::Range(f.column, low, high));
                                }
                                Ok(_) => {}
                            },
                            _ => {
                                errors.add(crate::engine::validate::echo_name(key), unknown_filter(res, key))
                            }
                        }
                    } else {
                        errors.add(crate::engine::validate::echo_name(key), unknown_filter(res, key));
                    }
                }
            }
        }
        errors.into_result()?;
        Ok(q)
    }

    pub fn offset(&self) -> u64 {
        (self.page - 1).saturating_mul(self.page_size)
    }

    /// Whether a search index finds the rows of this query.
    fn searching(&self, res: &Resource, dialect: Dialect) -> bool {
        self.conditions.iter().any(|c| match c {
            Condition::Like(col, needles) => searchable(res, dialect, col, needles).is_some(),
            _ => false,
        })
    }

    /// Whether this query's best plan depends on its filter values: a
    /// substring filter on a searched column, which PostgreSQL answers
    /// from its trigram index only when it plans for the needle (a
    /// generic plan of `ILIKE $1` scans).
    fn replans(&self, res: &Resource) -> bool {
        let Some(search) = res.search else {
            return false;
        };
        self.conditions
            .iter()
            .any(|c| matches!(c, Condition::Like(col, _) if search.columns.contains(col)))
    }

    fn push_conditions(&self, res: &Resource, sql: &mut Sql, dialect: Dialect) {
        // SQLite's LIKE already ignores ASCII case; PostgreSQL needs ILIKE.
        let like = match dialect {
            Dialect::Sqlite => " LIKE ",
            Dialect::Postgres => " ILIKE ",
        };
        for c in &self.conditions {
            match c {
                Condition::In(col, values) if values.len() == 1 => {
                    sql.push(" AND t.").push(col).push(" = ").bind(values[0].clone());
                }
                Condition::In(col, values) => {
                    sql.push(" AND t.")
                        .push(col)
                        .push(" IN (")
                        .bind_list(values.iter().cloned())
                        .push(")");
                }
                Condition::Like(col, needles) => {
                    sql.push(" AND (");
                    let search_table = searchable(res, dialect, col, needles);
                    for (i, n) in needles.iter().enumerate() {
                        if i > 0 {
                            sql.push(" OR ");
                        }
                        if let Some(table) = search_table {
                            // The resource's trigram index finds the rows
                            // (see `resource::Search`): the same rows as the
                            // LIKE, without reading every row of the scope.
                            sql.push("t.id IN (SELECT m.record_id FROM ")
                                .push(table)
                                .push("_rows m WHERE m.search_rowid IN (SELECT rowid FROM ")
                                .push(table)
                                .push(" WHERE ")
                                .push(col)
                                .push(" LIKE ")
                                .bind(format!("%{n}%"))
                                .push("))");
                            continue;
                        }
                        if dialect == Dialect::Sqlite && !n.is_ascii() {
                            // SQLite folds only ASCII case; fold both sides
                            // with Unicode rules (see db::sqlite `ulower`).
                            sql.push("ulower(t.")
                                .push(col)
                                .push(") LIKE ")
                                .bind(format!("%{}%", escape_like(&n.to_lowercase())));
                        } else {
                            sql.push("t.")
                                .push(col)
                                .push(like)
                                .bind(format!("%{}%", escape_like(n)));
                        }
                        sql.push(" ESCAPE '\\'");
                    }
                    sql.push(")");
                }
                Condition::Range(col, low, high) => {
                    if let Some(low) = low {
                        sql.push(" AND t.").push(col).push(" >= ").bind(low.clone());
                    }
                    if let Some(high) = high {
                        sql.push(" AND t.").push(col).push(" <= ").bind(high.clone());
                    }
                }
            }
        }
    }
}

fn filterable(res: &'static Resource, name: &str) -> Option<&'static Field> {
    res.field(name).filter(|f| f.filter && f.stored && !f.encrypted)
}

fn sortable(res: &Resource) -> Vec<&'static str> {
    res.fields.iter().filter(|f| f.sort).map(|f| f.name).collect()
}

pub fn unknown_expand(res: &Resource, name: &str) -> String {
    let name = crate::engine::validate::echo_name(name);
    let names: Vec<&str> = res.expands.iter().map(|e| e.name()).collect();
    format!(
        "Unknown expand '{name}'. Allowed: {}.",
        if names.is_empty() {
            "none".to_string()
        } else {
            names.join(", ")
        }
    )
}

fn unknown_filter(res: &Resource, key: &str) -> String {
    let key = crate::engine::validate::echo_name(key);
    let mut names: Vec<&str> = res
        .fields
        .iter()
        .filter(|f| f.filter && f.stored && !f.encrypted)
        .map(|f| f.name)
        .collect();
    names.extend(res.list_params.iter().copied());
    names.extend(["page", "page_size", "sort", "expand"]);
    format!("Unknown filter '{key}'. Allowed: {}.", names.join(", "))
}

fn escape_like(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn parse_int(f: &Field, s: &str) -> Result<Value, String> {
    if f.kind == Kind::Flag {
        return parse_flag(&serde_json::Value::String(s.to_string()))
            .map(|b| Value::Int(b as i64))
            .ok_or_else(|| "Must be 1 or 0.".to_string());
    }
    if let Kind::Money { max } = f.kind {
        return crate::money::parse_text(s.trim(), max)
            .map(Value::Int)
            .map_err(|_| "Must be an amount such as 10.00.".to_string());
    }
    s.trim()
        .parse::<i64>()
        .map(Value::Int)
        .map_err(|_| "Must be an integer.".to_string())
}

/// Turns one `field=value` into a condition, per the field's kind:
/// ids match exactly; text matches substrings; integers, dates and
/// timestamps take `a|b` ranges; a comma list means any of the values.
fn condition(
    f: &'static Field,
    value: &str,
    pairs: &[(String, String)],
    scope: &TenantScope,
    now: i64,
) -> Result<Option<Condition>, String> {
    let col = f.column;
    match f.kind {
        Kind::Id => Ok(Some(Condition::In(
            col,
            value
                .split(',')
                .map(|v| Value::Text(v.trim().to_string()))
                .collect(),
        ))),
        Kind::Text { .. } if f.exact => Ok(Some(Condition::In(
            col,
            value
                .split(',')
                .map(|v| Value::Text(v.trim().to_string()))
                .collect(),
        ))),
        Kind::Text { .. } => {
            let needles: Vec<String> = value
                .split(',')
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
                .collect();
            Ok((!needles.is_empty()).then_some(Condition::Like(col, needles)))
        }
        Kind::Date => {
            let date = |s: &str| -> Result<Option<Value>, String> {
                let s = s.trim();
                if s.is_empty() {
                    return Ok(None);
                }
                NaiveDate::parse_from_str(s, "%Y-%m-%d")
                    .map(|_| Some(Value::Text(s.to_string())))
                    .map_err(|_| "Dates are yyyy-mm-dd.".to_string())
            };
            if let Some((a, b)) = value.split_once('|') {
                return Ok(Some(Condition::Range(col, date(a)?, date(b)?)));
            }
            let values = value
                .split(',')
                .map(|v| date(v)?.ok_or_else(|| "Dates are yyyy-mm-dd.".to_string()))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Some(Condition::In(col, values)))
        }
        Kind::Ts => {
            if let Some((from, to)) = ts_keyword(value, f.name, pairs, scope.tz, now)? {
                return Ok(Some(Condition::Range(
                    col,
                    from.map(Value::Int),
                    to.map(Value::Int),
                )));
            }
            int_condition(f, value).map(Some).map_err(|_| {
                "Must be epoch seconds, a|b range, or one of today, yesterday, this week, last week, \
                 last 30 days, last 90 days, this month, last month, custom."
                    .to_string()
            })
        }
        Kind::Int { .. } | Kind::Flag | Kind::Money { .. } => int_condition(f, value).map(Some),
        Kind::Json { .. } => Err("This field cannot be filtered.".to_string()),
        // A title matches whole (its quotes in the stored array), in any case.
        Kind::Tags => {
            let needles: Vec<String> = value
                .split(',')
                .map(|v| v.trim())
                .filter(|v| !v.is_empty())
                .map(|v| serde_json::Value::from(v).to_string())
                .collect();
            Ok((!needles.is_empty()).then_some(Condition::Like(col, needles)))
        }
    }
}

fn int_condition(f: &'static Field, value: &str) -> Result<Condition, String> {
    if let Some((a, b)) = value.split_once('|') {
        let low = (!a.trim().is_empty()).then(|| parse_int(f, a)).transpose()?;
        let high = (!b.trim().is_empty()).then(|| parse_int(f, b)).transpose()?;
        return Ok(Condition::Range(f.column, low, high));
    }
    let values = value
        .split(',')
        .map(|v| parse_int(f, v))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Condition::In(f.column, values))
}

/// An inclusive range of epoch seconds; either end may be open.
pub type TsRange = (Option<i64>, Option<i64>);

/// The `_ts` keywords, as an inclusive `[from, to]` range of epoch seconds
/// in the location's time zone. Weeks start on Monday (ISO 8601).
pub fn ts_keyword(
    value: &str,
    field: &str,
    pairs: &[(String, String)],
    tz: Tz,
    now: i64,
) -> Result<Option<TsRange>, String> {
    let today = tz
        .timestamp_opt(now, 0)
        .single()
        .map(|t| t.date_naive())
        .ok_or("Clock out of range.")?;
    let start = |d: NaiveDate| -> i64 {
        tz.from_local_datetime(&d.and_hms_opt(0, 0, 0).unwrap_or_default())
            .earliest()
            // A midnight that does not exist (DST gap) starts an hour later.
            .or_else(|| {
                tz.from_local_datetime(&d.and_hms_opt(1, 0, 0).unwrap_or_default())
                    .earliest()
            })
            .map(|t| t.timestamp())
            .unwrap_or(now)
    };
    let day = |d: NaiveDate| (Some(start(d)), Some(start(d + Duration::days(1)) - 1));
    let month_start = |d: NaiveDate| NaiveDate::from_ymd_opt(d.year(), d.month(), 1).unwrap_or(d);
    let next_month = |d: NaiveDate| {
        let m = month_start(d);
        if m.month() == 12 {
            NaiveDate::from_ymd_opt(m.year() + 1, 1, 1).unwrap_or(m)
        } else {
            NaiveDate::from_ymd_opt(m.year(), m.month() + 1, 1).unwrap_or(m)
        }
    };
    let monday = today - Duration::days(today.weekday().num_days_from_monday() as i64);
    let range = match value.trim().to_lowercase().as_str() {
        "today" => day(today),
        "yesterday" => day(today - Duration::days(1)),
        "this week" => (Some(start(monday)), Some(start(monday + Duration::days(7)) - 1)),
        "last week" => (Some(start(monday - Duration::days(7))), Some(start(monday) - 1)),
        "last 30 days" => (
            Some(start(today - Duration::days(29))),
            Some(start(today + Duration::days(1)) - 1),
        ),
        "last 90 days" => (
            Some(start(today - Duration::days(89))),
            Some(start(today + Duration::days(1)) - 1),
        ),
        "this month" => (
            Some(start(month_start(today))),
            Some(start(next_month(today)) - 1),
        ),
        "last month" => {
            let first = month_start(month_start(today) - Duration::days(1));
            (Some(start(first)), Some(start(month_start(today)) - 1))
        }
        "custom" => {
            let get = |suffix: &str| -> Result<Option<i64>, String> {
                let key = format!("{field}_{suffix}");
                match pairs.iter().find(|(k, _)| *k == key) {
                    None => Ok(None),
                    Some((_, v)) => v
                        .parse::<i64>()
                        .map(Some)
                        .map_err(|_| format!("{key} must be epoch seconds.")),
                }
            };
            let (from, to) = (get("from")?, get("to")?);
            if from.is_none() && to.is_none() {
                return Err(format!("custom needs {field}_from and/or {field}_to."));
            }
            (from, to)
        }
        _ => return Ok(None),
    };
    Ok(Some(range))
}

/// The SQLite search table that can answer a substring filter of `col`
/// for all of `needles`: each of three characters or more (a trigram),
/// ASCII (whose case both sides fold alike) and free of LIKE's wildcards.
fn searchable(res: &Resource, dialect: Dialect, col: &str, needles: &[String]) -> Option<&'static str> {
    let search = res.search?;
    let usable = dialect == Dialect::Sqlite
        && search.columns.contains(&col)
        && needles
            .iter()
            .all(|n| n.len() >= 3 && n.is_ascii() && !n.contains(['%', '_', '\\']));
    usable.then_some(search.table)
}

/// The scoped, filtered and sorted select of a list, before any page.
fn ordered(
    res: &'static Resource,
    scope: &TenantScope,
    q: &ListQuery,
    extra: Option<&dyn Fn(&mut Sql)>,
    dialect: Dialect,
) -> Sql {
    let mut sql = select_with(res, scope, q.searching(res, dialect));
    q.push_conditions(res, &mut sql, dialect);
    if let Some(extra) = extra {
        extra(&mut sql);
    }
    sql.replan = q.replans(res);
    let dir = if q.descending { "DESC" } else { "ASC" };
    sql.push(" ORDER BY t.").push(q.sort.column).push(" ").push(dir);
    if q.sort.name != "id" {
        sql.push(", t.id ").push(dir);
    }
    sql
}

/// Every record of a scoped list, in its order, one at a time (an export:
/// no page, and never all of them in memory); `each` answers false to
/// stop.
pub fn each(
    conn: &mut dyn Conn,
    res: &'static Resource,
    scope: &TenantScope,
    q: &ListQuery,
    extra: Option<&dyn Fn(&mut Sql)>,
    each: &mut dyn FnMut(Record) -> bool,
) -> Result<(), DbError> {
    let sql = ordered(res, scope, q, extra, conn.dialect());
    conn.query_each(&sql, &mut |row| each(Record::from_row(res, row)))
}

/// The tables whose rows per location `row_counts` keeps, moved by
/// triggers in the writing transaction (migration 25, ADR 0022): the
/// lists that grow without bound.
pub const COUNTED: &[&str] = &["contacts", "transactions", "account_vaults"];

/// The total of an unfiltered list of a [`COUNTED`] table: the sum of its
/// scope's kept counts (a row per location, or per stripe on PostgreSQL)
/// instead of a count of every row, which grows with the table. `None`
/// when anything narrows the list (a filter, a parent, a resource's own
/// condition).
fn kept_total(
    res: &Resource,
    scope: &TenantScope,
    q: &ListQuery,
    extra: Option<&dyn Fn(&mut Sql)>,
) -> Option<Sql> {
    let counted = COUNTED.contains(&res.table) && matches!(res.scope, Scope::Column("location_id"));
    if !counted || !q.conditions.is_empty() {
        return None;
    }
    if let Some(extra) = extra {
        let mut narrowing = Sql::new("");
        extra(&mut narrowing);
        if !narrowing.text.is_empty() {
            return None;
        }
    }
    let mut sql = Sql::new("SELECT CAST(COALESCE(SUM(c.n), 0) AS BIGINT) FROM row_counts c");
    if scope.leaf {
        sql.push(" WHERE c.location_id = ")
            .bind(scope.location_id.clone());
    } else {
        let (lower, upper) = scope.bounds();
        sql.push(" JOIN locations s ON s.id = c.location_id WHERE s.path >= ")
            .bind(lower)
            .push(" AND s.path < ")
            .bind(upper);
    }
    sql.push(" AND c.table_name = ").bind(res.table);
    Some(sql)
}

/// One page of a scoped list and the total count. The page comes first:
/// a first page shorter than the page size is the whole list, and needs
/// no count (a search that finds a few rows pays for one query, not two).
pub fn list(
    conn: &mut dyn Conn,
    res: &'static Resource,
    scope: &TenantScope,
    q: &ListQuery,
    extra: Option<&dyn Fn(&mut Sql)>,
) -> Result<(Vec<Record>, u64), DbError> {
    let mut sql = ordered(res, scope, q, extra, conn.dialect());
    sql.push(" LIMIT ")
        .bind(q.page_size as i64)
        .push(" OFFSET ")
        .bind(q.offset().min(i64::MAX as u64) as i64);
    let rows = conn.query(&sql)?;
    let total = if q.offset() == 0 && (rows.len() as u64) < q.page_size {
        rows.len() as u64
    } else if let Some(kept) = kept_total(res, scope, q, extra) {
        conn.query_int(&kept)?.max(0) as u64
    } else {
        let mut count = Sql::new("SELECT COUNT(*)");
        from_scoped_with(res, scope, &mut count, q.searching(res, conn.dialect()));
        q.push_conditions(res, &mut count, conn.dialect());
        if let Some(extra) = extra {
            extra(&mut count);
        }
        count.replan = q.replans(res);
        conn.query_int(&count)?.max(0) as u64
    };
    Ok((
        rows.into_iter().map(|r| Record::from_row(res, r)).collect(),
        total,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope() -> TenantScope {
        TenantScope {
            location_id: "x".into(),
            path: "/a/b/".into(),
            tz: "America/New_York".parse().unwrap(),
            leaf: false,
        }
    }

    #[test]
    fn lists_are_planned_for_their_filter_values() {
        // A generic PostgreSQL plan cannot see that `%smith%` may use the
        // trigram index; a list's statement is planned per run instead.
        let res = &crate::resources::CONTACT;
        let pairs = vec![("last_name".to_string(), "smith".to_string())];
        let q = ListQuery::parse(res, &pairs, &scope(), 0).unwrap();
        let sql = ordered(res, &scope(), &q, None, Dialect::Postgres);
        assert!(sql.replan);
        assert!(sql.text.contains("ORDER BY"));
        // No substring filter on a searched column: one cached plan.
        for pairs in [vec![], vec![("city".to_string(), "austin".to_string())]] {
            let q = ListQuery::parse(res, &pairs, &scope(), 0).unwrap();
            assert!(!ordered(res, &scope(), &q, None, Dialect::Postgres).replan);
        }
        assert!(!Sql::new("SELECT 1").replan, "other statements stay cached");
    }

    #[test]
    fn scope_bounds_cover_exactly_the_subtree() {
        let (lo, hi) = scope().bounds();
        for inside in ["/a/b/", "/a/b/c/", "/a/b/zz/y/"] {
            assert!(inside >= lo.as_str() && inside < hi.as_str(), "{inside}");
        }
        for outside in ["/a/", "/a/bc/", "/a/c/", "/a/b0/"] {
            assert!(!(outside >= lo.as_str() && outside < hi.as_str()), "{outside}");
        }
    }

    #[test]
    fn ts_keywords_follow_the_time_zone() {
        // 2024-03-10 12:00 UTC = 08:00 in New York (DST began that night).
        let now = 1_710_072_000;
        let (from, to) = ts_keyword("today", "created_ts", &[], scope().tz, now)
            .unwrap()
            .unwrap();
        assert_eq!(from, Some(1_710_046_800)); // 2024-03-10 00:00 EST = 05:00 UTC
        assert_eq!(to, Some(1_710_129_600 - 1)); // 2024-03-11 00:00 EDT = 04:00 UTC
        let (from, _) = ts_keyword("last month", "created_ts", &[], scope().tz, now)
            .unwrap()
            .unwrap();
        assert_eq!(from, Some(1_706_763_600)); // 2024-02-01 00:00 EST
        assert!(ts_keyword("someday", "created_ts", &[], scope().tz, now)
            .unwrap()
            .is_none());
        let pairs = vec![("created_ts_from".to_string(), "5".to_string())];
        let (from, to) = ts_keyword("custom", "created_ts", &pairs, scope().tz, now)
            .unwrap()
            .unwrap();
        assert_eq!((from, to), (Some(5), None));
    }

    #[test]
    fn like_escapes_wildcards() {
        assert_eq!(escape_like("50%_a\\"), "50\\%\\_a\\\\");
    }
}
