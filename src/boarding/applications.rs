//! Merchant applications: created against an open offer, answered by
//! whole resubmissions while a `draft`, validated against the offer's
//! rules, published by their signature, then made a merchant by an
//! operator. Sensitive answers are sealed in `boarding_secrets` and only
//! ever shown masked.

use super::answers::{self, Answers};
use super::offers::{self, Offer};
use super::{iso, new_uuid_v4, parse_uuid, today, BOARDED, DRAFT, PUBLISHED};
use crate::crypto::Keyring;
use crate::db::{Conn, Sql, Value};
use crate::error::{ApiError, ApiResult, FieldErrors};
use crate::ids::new_id;
use serde_json::{json, Map, Value as Json};
use std::sync::Arc;

/// An application as stored (its sensitive answers apart).
#[derive(Debug, Clone)]
pub struct Application {
    pub id: String,
    pub offer_id: String,
    pub user_id: String,
    pub vertical_preset_id: Option<String>,
    pub status: String,
    pub source: String,
    /// The answers without the sensitive ones.
    pub answers: Answers,
    pub signature: Option<Json>,
    pub location_id: Option<String>,
    pub published_ts: Option<i64>,
    pub boarded_ts: Option<i64>,
    pub created_ts: i64,
    pub modified_ts: i64,
}

const COLUMNS: &str = "id, offer_id, user_id, vertical_preset_id, status, source, answers, signature, \
    location_id, published_ts, boarded_ts, created_ts, modified_ts";

fn from_row(r: &[Value]) -> ApiResult<Application> {
    let t = |i: usize| r[i].as_str().map(str::to_string);
    Ok(Application {
        id: t(0).unwrap_or_default(),
        offer_id: t(1).unwrap_or_default(),
        user_id: t(2).unwrap_or_default(),
        vertical_preset_id: t(3),
        status: t(4).unwrap_or_default(),
        source: t(5).unwrap_or_default(),
        answers: serde_json::from_str(r[6].as_str().unwrap_or("{}")).map_err(ApiError::internal)?,
        signature: t(7)
            .map(|s| serde_json::from_str(&s))
            .transpose()
            .map_err(ApiError::internal)?,
        location_id: t(8),
        published_ts: r[9].as_int(),
        boarded_ts: r[10].as_int(),
        created_ts: r[11].as_int().unwrap_or(0),
        modified_ts: r[12].as_int().unwrap_or(0),
    })
}

/// The application with this id; 404 when there is none.
pub fn find(conn: &mut dyn Conn, id: &str) -> ApiResult<Application> {
    let not_found = || ApiError::not_found("Application");
    let id = parse_uuid(id).ok_or_else(not_found)?;
    let mut sql = Sql::new(&format!(
        "SELECT {COLUMNS} FROM boarding_applications WHERE id = "
    ));
    sql.bind(id);
    conn.query_one(&sql)?
        .map(|r| from_row(&r))
        .transpose()?
        .ok_or_else(not_found)
}

fn offer_of(conn: &mut dyn Conn, app: &Application) -> ApiResult<Offer> {
    offers::find(conn, &app.offer_id)?.ok_or_else(|| ApiError::internal("application without its offer"))
}

/// The sensitive answers of an application: (path, sealed, masked).
fn secrets(conn: &mut dyn Conn, id: &str) -> ApiResult<Vec<(String, String, String)>> {
    Ok(conn
        .query(&Sql::with(
            "SELECT path, sealed, masked FROM boarding_secrets WHERE application_id = ? ORDER BY path",
            vec![id.into()],
        ))?
        .into_iter()
        .map(|r| {
            let t = |i: usize| r[i].as_str().unwrap_or_default().to_string();
            (t(0), t(1), t(2))
        })
        .collect())
}

fn put_path(answers: &mut Answers, path: &str, value: Json) {
    if let Some((g, name)) = path.split_once('.') {
        answers
            .entry(g.to_string())
            .or_default()
            .insert(name.to_string(), value);
    }
}

/// Every answer in clear (validation and boarding need them).
fn clear_answers(conn: &mut dyn Conn, keyring: &Keyring, app: &Application) -> ApiResult<Answers> {
    let mut answers = app.answers.clone();
    for (path, sealed, _) in secrets(conn, &app.id)? {
        let plain = keyring
            .decrypt(&sealed)
            .map_err(|e| ApiError::internal(format!("boarding secret of {}: {e}", app.id)))?;
        put_path(&mut answers, &path, Json::String(plain));
    }
    Ok(answers)
}

/// The application record: the spec's fields, plus `userId`,
/// `publishedAt`, `signature` and the merchant's `locationId`. Sensitive
/// answers are masked.
pub fn render(conn: &mut dyn Conn, app: &Application) -> ApiResult<Json> {
    let mut answers = app.answers.clone();
    for (path, _, masked) in secrets(conn, &app.id)? {
        put_path(&mut answers, &path, Json::String(masked));
    }
    Ok(json!({
        "applicationId": app.id,
        "verticalPresetId": app.vertical_preset_id,
        "offerId": app.offer_id,
        "userId": app.user_id,
        "status": app.status,
        "source": app.source,
        "createdAt": iso(app.created_ts),
        "modifiedAt": iso(app.modified_ts),
        "publishedAt": app.published_ts.map(iso),
        "locationId": app.location_id,
        "answers": answers,
        "signature": app.signature,
    }))
}

/// Stores a whole set of answers: what is not in it is erased. The row is
/// written (and so locked) first, only while a draft: a signature that
/// committed meanwhile makes this a 409 and rolls everything back.
fn save_answers(
    conn: &mut dyn Conn,
    keyring: &Keyring,
    app_id: &str,
    mut all: Answers,
    now: i64,
) -> ApiResult<()> {
    let sensitive: Vec<(String, String)> = answers::sensitive_paths()
        .filter_map(|path| {
            let (g, name) = path.split_once('.')?;
            let group = all.get_mut(g)?;
            let Some(Json::String(plain)) = group.remove(name) else {
                return None;
            };
            if group.is_empty() {
                all.remove(g);
            }
            Some((path, plain))
        })
        .collect();
    let text = serde_json::to_string(&all).map_err(ApiError::internal)?;
    let changed = conn.execute(&Sql::with(
        "UPDATE boarding_applications SET answers = ?, modified_ts = ? WHERE id = ? AND status = ?",
        vec![text.into(), now.into(), app_id.into(), DRAFT.into()],
    ))?;
    if changed == 0 {
        return Err(no_longer_draft(PUBLISHED));
    }
    conn.execute(&Sql::with(
        "DELETE FROM boarding_secrets WHERE application_id = ?",
        vec![app_id.into()],
    ))?;
    for (path, plain) in sensitive {
        conn.execute(&Sql::with(
            "INSERT INTO boarding_secrets (id, application_id, path, sealed, masked) VALUES (?, ?, ?, ?, ?)",
            vec![
                new_id().into(),
                app_id.into(),
                path.into(),
                keyring.encrypt(&plain).into(),
                answers::mask(&plain).into(),
            ],
        ))?;
    }
    Ok(())
}

fn id_member(input: &Map<String, Json>, name: &str, errors: &mut FieldErrors) -> Option<String> {
    match input.get(name) {
        None | Some(Json::Null) => {
            errors.add(name, format!("{} cannot be blank.", answers::label(name)));
            None
        }
        Some(raw) => {
            let id = raw.as_str().and_then(parse_uuid);
            if id.is_none() {
                errors.add(
                    name,
                    format!(
                        "{} must be a UUID (32 hexadecimal characters).",
                        answers::label(name)
                    ),
                );
            }
            id
        }
    }
}

/// `POST /v1/application`: `{offerId, userId, answers}`.
pub fn create(
    conn: &mut dyn Conn,
    keyring: &Arc<Keyring>,
    input: &Map<String, Json>,
    now: i64,
) -> ApiResult<Json> {
    let mut errors = FieldErrors::new();
    for key in input.keys() {
        if !matches!(key.as_str(), "offerId" | "userId" | "answers") {
            errors.add(
                crate::engine::validate::echo_name(key),
                "Unknown member: send offerId, userId and answers.".to_string(),
            );
        }
    }
    let offer_id = id_member(input, "offerId", &mut errors);
    let user_id = id_member(input, "userId", &mut errors);
    let offer = match &offer_id {
        Some(id) => match offers::find(conn, id)?.filter(Offer::is_open) {
            Some(o) => Some(o),
            None => {
                errors.add("offerId", "No open (active and published) offer has this id.");
                None
            }
        },
        None => None,
    };
    let empty = Map::new();
    let given = match input.get("answers") {
        None | Some(Json::Null) => &empty,
        Some(Json::Object(m)) => m,
        Some(_) => {
            errors.add("answers", "Answers must be an object of answer groups.");
            &empty
        }
    };
    errors.into_result()?;
    let (Some(offer), Some(user_id)) = (offer, user_id) else {
        return Err(ApiError::internal("checked above"));
    };
    let parsed = answers::parse(given, &offer.rules(), today(now)).map_err(ApiError::Validation)?;
    let id = new_uuid_v4();
    conn.execute(&Sql::with(
        "INSERT INTO boarding_applications (id, offer_id, user_id, vertical_preset_id, status, source, answers, \
         created_ts, modified_ts) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        vec![
            id.clone().into(),
            offer.id.clone().into(),
            user_id.into(),
            offer.vertical_preset_id.clone().into(),
            DRAFT.into(),
            "api".into(),
            "{}".into(),
            now.into(),
            now.into(),
        ],
    ))?;
    save_answers(conn, keyring, &id, parsed, now)?;
    let app = find(conn, &id)?;
    render(conn, &app)
}

fn no_longer_draft(status: &str) -> ApiError {
    let mut errors = FieldErrors::new();
    errors.add(
        "status",
        format!("The application is {status} and can no longer be changed."),
    );
    ApiError::Conflict(errors)
}

fn require_draft(app: &Application) -> ApiResult<()> {
    if app.status == DRAFT {
        Ok(())
    } else {
        Err(no_longer_draft(&app.status))
    }
}

/// `PUT /v1/application/{id}`: the answer groups at the top level, a whole
/// resubmission (blank or omitted answers are erased).
pub fn update(
    conn: &mut dyn Conn,
    keyring: &Arc<Keyring>,
    id: &str,
    input: &Map<String, Json>,
    now: i64,
) -> ApiResult<Json> {
    let app = find(conn, id)?;
    require_draft(&app)?;
    let offer = offer_of(conn, &app)?;
    let parsed = answers::parse(input, &offer.rules(), today(now)).map_err(ApiError::Validation)?;
    save_answers(conn, keyring, &app.id, parsed, now)?;
    let app = find(conn, id)?;
    render(conn, &app)
}

/// Every missing or invalid answer against the offer's current rules.
fn problems(
    conn: &mut dyn Conn,
    keyring: &Keyring,
    app: &Application,
    offer: &Offer,
    now: i64,
) -> ApiResult<FieldErrors> {
    let clear = clear_answers(conn, keyring, app)?;
    let rules = offer.rules();
    let input: Map<String, Json> = clear
        .iter()
        .map(|(g, m)| (g.clone(), Json::Object(m.clone())))
        .collect();
    let mut errors = match answers::parse(&input, &rules, today(now)) {
        Ok(_) => FieldErrors::new(),
        Err(e) => e,
    };
    for (path, messages) in answers::missing(&clear, &rules).0 {
        for m in messages {
            errors.add(path.clone(), m);
        }
    }
    Ok(errors)
}

/// `GET /v1/application/{id}/validate`: `{applicationId, status, valid,
/// errors}`, `errors` in the shape of a 422 body.
pub fn validate(conn: &mut dyn Conn, keyring: &Arc<Keyring>, id: &str, now: i64) -> ApiResult<Json> {
    let app = find(conn, id)?;
    let offer = offer_of(conn, &app)?;
    let errors = problems(conn, keyring, &app, &offer, now)?;
    Ok(json!({
        "applicationId": app.id,
        "status": app.status,
        "valid": errors.is_empty(),
        "errors": errors.to_json(),
    }))
}

/// How long before its application was created a signature may be dated:
/// a form may take the signature with the answers and create the
/// application after, and the signer's clock may be off. Anything older
/// (`0001-01-01`) cannot be this application's signature.
const SIGNED_BEFORE_CREATED_S: i64 = 24 * 3600;

/// Checks a signature: consent given, the signer's name, a public IP
/// address and an ISO 8601 date-time, not in the future nor more than a
/// day before the application was created (`created_ts`).
fn parse_signature(input: &Map<String, Json>, created_ts: i64, now: i64) -> ApiResult<Json> {
    let mut errors = FieldErrors::new();
    for key in input.keys() {
        if !matches!(key.as_str(), "eConsent" | "name" | "ipAddress" | "timestamp") {
            errors.add(
                crate::engine::validate::echo_name(key),
                "Unknown member: send eConsent, name, ipAddress and timestamp.".to_string(),
            );
        }
    }
    let get = |k: &str| input.get(k).filter(|v| !v.is_null());
    // A boolean, as the spec types it: consent is not read into "1".
    match get("eConsent") {
        Some(Json::Bool(true)) => {}
        None => errors.add("eConsent", "E consent cannot be blank."),
        Some(Json::Bool(false)) => errors.add(
            "eConsent",
            "E consent must be true: the signer consents to sign electronically.",
        ),
        Some(_) => errors.add("eConsent", "E consent must be the boolean true."),
    }
    let name = super::text_field(get("name").unwrap_or(&Json::Null), "name", 2, 100, &mut errors);
    if name.is_none() && !errors.has("name") {
        errors.add("name", "Name cannot be blank.");
    }
    let ip = get("ipAddress").and_then(Json::as_str).map(str::trim);
    let ip = match ip.map(str::parse::<std::net::IpAddr>) {
        None => {
            errors.add("ipAddress", "Ip address cannot be blank.");
            None
        }
        Some(Err(_)) => {
            errors.add("ipAddress", "Ip address must be an IPv4 or IPv6 address.");
            None
        }
        Some(Ok(addr)) if !crate::postbacks::send::is_public(addr) => {
            errors.add("ipAddress", "Ip address must be a public address.");
            None
        }
        Some(Ok(addr)) => Some(addr.to_string()),
    };
    // ISO 8601: a `T` between date and time (RFC 3339 also takes a
    // space, which ISO 8601 does not).
    let iso = |t: &str| {
        chrono::DateTime::parse_from_rfc3339(t)
            .ok()
            .filter(|_| t.as_bytes().get(10) == Some(&b'T'))
            .ok_or(())
    };
    let ts = match get("timestamp") {
        None => None,
        Some(Json::String(t)) => Some(t.trim()),
        Some(_) => Some(""),
    };
    let ts = match ts.map(|t| (t, iso(t))) {
        None => {
            errors.add("timestamp", "Timestamp cannot be blank.");
            None
        }
        Some((_, Err(_))) => {
            errors.add(
                "timestamp",
                "Timestamp must be an ISO 8601 date-time with its offset, such as 2021-01-15T16:34:41.766Z.",
            );
            None
        }
        // A few minutes of clock skew between the signer and us.
        Some((_, Ok(t))) if t.timestamp() > now + 300 => {
            errors.add("timestamp", "Timestamp cannot be in the future.");
            None
        }
        Some((_, Ok(t))) if t.timestamp() < created_ts - SIGNED_BEFORE_CREATED_S => {
            errors.add(
                "timestamp",
                format!(
                    "Timestamp cannot be more than a day before the application was created ({}).",
                    super::iso(created_ts)
                ),
            );
            None
        }
        Some((t, Ok(_))) => Some(t.to_string()),
    };
    errors.into_result()?;
    Ok(json!({ "eConsent": true, "name": name, "ipAddress": ip, "timestamp": ts }))
}

/// `POST /v1/application/{id}/signature`: signs a complete, valid draft
/// and publishes it. An incomplete one answers 422 with what is missing.
pub fn sign(
    conn: &mut dyn Conn,
    keyring: &Arc<Keyring>,
    id: &str,
    input: &Map<String, Json>,
    now: i64,
) -> ApiResult<Json> {
    let app = find(conn, id)?;
    require_draft(&app)?;
    let signature = parse_signature(input, app.created_ts, now)?;
    let offer = offer_of(conn, &app)?;
    // Published first: the row is then locked, and the answers checked
    // below are the ones signed. Problems roll the publication back.
    let changed = conn.execute(&Sql::with(
        "UPDATE boarding_applications SET status = ?, signature = ?, published_ts = ?, modified_ts = ? \
         WHERE id = ? AND status = ?",
        vec![
            PUBLISHED.into(),
            signature.to_string().into(),
            now.into(),
            now.into(),
            app.id.clone().into(),
            DRAFT.into(),
        ],
    ))?;
    if changed == 0 {
        return Err(no_longer_draft(PUBLISHED));
    }
    let app = find(conn, id)?;
    problems(conn, keyring, &app, &offer, now)?.into_result()?;
    render(conn, &app)
}

/// What `ferrogate boarding application merchant` prints.
#[derive(Debug, serde::Serialize)]
pub struct Boarded {
    #[serde(rename = "applicationId")]
    pub application_id: String,
    pub status: &'static str,
    pub merchant: crate::bootstrap::Credentials,
}

fn clip(v: Option<&Json>, max: usize) -> Option<String> {
    v.and_then(Json::as_str).map(|s| s.chars().take(max).collect())
}

/// Makes a published application a merchant, in one transaction: a new
/// location below the root with its cc and ach product transactions, a
/// developer and an administrator (as `bootstrap`), the location's
/// address and routing number from the answers.
pub fn board(conn: &mut dyn Conn, keyring: &Arc<Keyring>, id: &str, now: i64) -> ApiResult<Boarded> {
    let app = find(conn, id)?;
    if app.status != PUBLISHED {
        let mut errors = FieldErrors::new();
        errors.add(
            "status",
            match app.status.as_str() {
                BOARDED => "The application is already a merchant.".to_string(),
                other => format!(
                    "The application is {other}: only a signed (published) application can be boarded."
                ),
            },
        );
        return Err(ApiError::Conflict(errors));
    }
    // Claimed first: of two concurrent commands, one makes the merchant.
    let claimed = conn.execute(&Sql::with(
        "UPDATE boarding_applications SET status = ?, boarded_ts = ?, modified_ts = ? WHERE id = ? AND status = ?",
        vec![
            BOARDED.into(),
            now.into(),
            now.into(),
            app.id.clone().into(),
            PUBLISHED.into(),
        ],
    ))?;
    if claimed == 0 {
        let mut errors = FieldErrors::new();
        errors.add("status", "The application is already a merchant.");
        return Err(ApiError::Conflict(errors));
    }
    let answers = clear_answers(conn, keyring, &app)?;
    let get = |g: &str, f: &str| answers.get(g).and_then(|m| m.get(f));
    let name = clip(get("organizationInformation", "organizationName"), 64);
    let merchant = crate::bootstrap::create_tenant(conn, keyring, name, now)?;
    let place = if answers.contains_key("organizationLocation") {
        "organizationLocation"
    } else {
        "organizationAddress"
    };
    // A location's address lines hold 32 characters; an answer may have 35,
    // so what does not fit goes on the second line, before the unit.
    let street: Vec<char> = get(place, "address")
        .and_then(Json::as_str)
        .unwrap_or_default()
        .chars()
        .collect();
    let line1: String = street.iter().take(32).collect();
    let rest: String = street.iter().skip(32).collect();
    let unit = get(place, "unit").and_then(Json::as_str).unwrap_or_default();
    let line2: String = [rest.trim(), unit]
        .iter()
        .filter(|s| !s.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .take(32)
        .collect();
    conn.execute(&Sql::with(
        "UPDATE locations SET address1 = ?, address2 = ?, city = ?, state = ?, zip_code = ?, office_phone = ?, aba = ? \
         WHERE id = ?",
        vec![
            Some(line1).filter(|s| !s.is_empty()).into(),
            Some(line2).filter(|s| !s.is_empty()).into(),
            clip(get(place, "city"), 100).into(),
            clip(get(place, "state"), 100).into(),
            clip(get(place, "zipCode"), 10).into(),
            clip(get(place, "phoneNumber"), 10).into(),
            clip(get("bankInformation", "routingNumber"), 9).into(),
            merchant.location_id.clone().into(),
        ],
    ))?;
    conn.execute(&Sql::with(
        "UPDATE boarding_applications SET location_id = ? WHERE id = ?",
        vec![merchant.location_id.clone().into(), app.id.clone().into()],
    ))?;
    Ok(Boarded {
        application_id: app.id,
        status: BOARDED,
        merchant,
    })
}

/// Applications for operators, optionally of one status: `limit` of
/// them, newest first, after the first `offset`; and how many there are
/// in all.
pub fn list(
    conn: &mut dyn Conn,
    status: Option<&str>,
    offset: u64,
    limit: u64,
) -> ApiResult<(Vec<Json>, u64)> {
    let of_status = |sql: &mut Sql| {
        if let Some(s) = status {
            sql.push(" WHERE status = ").bind(s.to_string());
        }
    };
    let mut sql = Sql::new(&format!("SELECT {COLUMNS} FROM boarding_applications"));
    of_status(&mut sql);
    sql.push(" ORDER BY created_ts DESC, id DESC LIMIT ")
        .bind(limit as i64)
        .push(" OFFSET ")
        .bind(offset as i64);
    let apps = conn
        .query(&sql)?
        .iter()
        .map(|r| from_row(r))
        .collect::<ApiResult<Vec<_>>>()?;
    let mut count = Sql::new("SELECT COUNT(*) FROM boarding_applications");
    of_status(&mut count);
    let total = conn.query_int(&count)? as u64;
    let rendered = apps
        .iter()
        .map(|a| render(conn, a))
        .collect::<ApiResult<Vec<_>>>()?;
    Ok((rendered, total))
}
